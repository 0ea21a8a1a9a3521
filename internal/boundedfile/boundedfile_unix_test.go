//go:build unix

package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a device and a directory are refused at once, naming the
// file; a FIFO without a writer never blocks the open.
func TestReadRegularRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fifo, os.DevNull, dir} {
		done := make(chan error, 1)
		go func() { _, err := ReadRegular(name, 10); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s: ReadRegular blocked", name)
		}
		if err := CheckRegular(name); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), name) {
			t.Errorf("CheckRegular(%s): %v", name, err)
		}
	}
	if data, err := ReadRegular(regular, 2); err != nil || string(data) != "ok" {
		t.Errorf("a regular file: %q %v", data, err)
	}
	if _, err := ReadRegular(regular, 1); err == nil || !strings.Contains(err.Error(), "larger than 1 bytes") {
		t.Errorf("past the bound: %v", err)
	}
	if err := CheckRegular(regular); err != nil {
		t.Errorf("CheckRegular of a regular file: %v", err)
	}
	if err := CheckRegular(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("CheckRegular of a missing file: %v", err)
	}
}
