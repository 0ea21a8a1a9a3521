//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package catalog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The helper process is this test binary run again with
// -test.run=TestStoreLockHelperProcess and these variables set.
const (
	helperModeEnv = "CATALOG_STORE_HELPER_MODE" // "hold" or "try"
	helperDirEnv  = "CATALOG_STORE_HELPER_DIR"
)

// Exit statuses of a "try" helper.
const (
	helperOpened = 0
	helperInUse  = 3
	helperFailed = 4
)

// TestStoreLockHelperProcess is not a test: it is the child process of the
// two-process tests. "hold" opens the store, says "held" on stdout and
// keeps it open until its stdin closes; "try" opens the store once and
// reports the outcome in its exit status and on stdout.
func TestStoreLockHelperProcess(t *testing.T) {
	mode, dir := os.Getenv(helperModeEnv), os.Getenv(helperDirEnv)
	if mode == "" {
		t.Skip("run as a child process by the two-process store tests")
	}
	c, err := Open(dir)
	switch {
	case mode == "try" && errors.Is(err, ErrStoreInUse):
		fmt.Println("in-use:", err)
		os.Exit(helperInUse)
	case err != nil:
		fmt.Println("error:", err)
		os.Exit(helperFailed)
	case mode == "try":
		fmt.Println("opened at generation", c.Generation())
		os.Exit(helperOpened)
	}
	// A second deploy from the child shows it really owns the store.
	if _, err := c.Deploy(weighted("child", "holder", 1)); err != nil {
		fmt.Println("error:", err)
		os.Exit(helperFailed)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := c.Close(); err != nil {
		fmt.Println("error:", err)
		os.Exit(helperFailed)
	}
	os.Exit(0)
}

func helperCommand(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreLockHelperProcess$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	return cmd
}

// holdInChild starts a child that opens dir and holds it; it returns once
// the child says so. Closing the returned writer lets the child close the
// store and exit.
func holdInChild(t *testing.T, dir string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := helperCommand(t, "hold", dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		_ = stdin.Close()
		_ = cmd.Wait()
		t.Fatalf("the child did not take the store: %q, %v", line, err)
	}
	return cmd, stdin
}

// tryInChild runs a child that opens dir once and returns its exit status
// and what it printed.
func tryInChild(t *testing.T, dir string) (int, string) {
	t.Helper()
	out, err := helperCommand(t, "try", dir).Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

func TestAStoreHeldByAnotherProcessIsInUse(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	cmd, release := holdInChild(t, dir)
	_, err = Open(dir)
	if !errors.Is(err, ErrStoreInUse) || !strings.Contains(err.Error(), dir) {
		_ = release.Close()
		_ = cmd.Wait()
		t.Fatalf("Open while another process holds the store = %v, want ErrStoreInUse naming %s", err, dir)
	}
	if _, err := Create(dir, GenerousCapacity); !errors.Is(err, ErrStoreInUse) {
		t.Errorf("Create while another process holds the store = %v", err)
	}
	if err := New(GenerousCapacity).WriteStore(dir); !errors.Is(err, ErrStoreInUse) {
		t.Errorf("WriteStore while another process holds the store = %v", err)
	}
	if err := release.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the holding child: %v", err)
	}

	reopened, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the child exited = %v", err)
	}
	defer reopened.Close()
	if _, g, ok := reopened.Pin().Deployment("child", "holder"); !ok || g != 2 {
		t.Fatalf("the child's deploy: generation %d, present %v", g, ok)
	}
}

func TestAStoreHeldHereIsInUseInAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	code, out := tryInChild(t, dir)
	if code != helperInUse || !strings.Contains(out, "in-use:") || !strings.Contains(out, dir) {
		t.Fatalf("a child opening a store held here: exit %d, %q; want exit %d naming %s", code, out, helperInUse, dir)
	}
	// The refused child removed nothing and wrote nothing.
	if g := mustDeploy(t, c, weighted("globex", "render", 1)); g != 2 {
		t.Fatalf("generation %d after the refused child, want 2", g)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	code, out = tryInChild(t, dir)
	if code != helperOpened || !strings.Contains(out, "opened at generation 2") {
		t.Fatalf("a child opening the closed store: exit %d, %q", code, out)
	}
}

func TestAKilledHolderReleasesTheStore(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cmd, release := holdInChild(t, dir)
	defer release.Close()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The kernel drops the lock with the process; allow it a moment.
	deadline := time.Now().Add(time.Minute) // a loaded machine may be slow
	for {
		reopened, err := Open(dir)
		if err == nil {
			_ = reopened.Close()
			return
		}
		if !errors.Is(err, ErrStoreInUse) || time.Now().After(deadline) {
			t.Fatalf("Open after the holder was killed = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
