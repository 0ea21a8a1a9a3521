package boundedfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadStopsPastTheBound(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(name, 5); err != nil || string(data) != "12345" {
		t.Errorf("at the bound: %q %v", data, err)
	}
	if _, err := Read(name, 4); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "larger than 4 bytes") {
		t.Errorf("past the bound: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 5); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a missing file: %v", err)
	}
}
