package linuxtest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readyEnv names the file a bottom child creates once it sleeps.
const readyEnv = "LINUXTEST_TEST_READY"

// A middle child starts a bottom child the way Isolated does and dies once
// the bottom child sleeps, without awaiting it: only the parent-death signal
// can end the bottom child, which sits in a process group of its own.
func TestChildDiesWithItsParent(t *testing.T) {
	ready := os.Getenv(readyEnv)
	if ready == "" { // the test's own process; the children inherit it
		ready = filepath.Join(t.TempDir(), "bottom-sleeps")
		t.Setenv(readyEnv, ready)
	}
	if os.Getenv(envBody) == "bottom" {
		_, _ = Isolated(t, "bottom", time.Minute, func(t *testing.T) {
			if err := os.WriteFile(ready, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			// Ends on its own should the signal fail; the bottom child
			// writes nothing meanwhile, so no broken pipe kills it instead.
			time.Sleep(2 * time.Minute)
		})
		return
	}
	outcome, err := Isolated(t, "middle", 2*time.Minute, func(t *testing.T) {
		bottom, err := startChild(childArgs(t.Name()), childEnv(t.Name(), "bottom"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("bottom=%d\n", bottom.cmd.Process.Pid)
		// A loaded machine may take seconds to start a race-enabled child.
		for start := time.Now(); time.Since(start) < 90*time.Second; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				os.Exit(3)
			}
		}
		t.Fatal("bottom child never slept")
	})
	if errors.Is(err, ErrOtherChild) {
		return
	}
	if !errors.Is(err, ErrChildFailed) {
		t.Fatalf("middle: %v; want ErrChildFailed from its exit; output:\n%s", err, outcome.Output)
	}
	match := regexp.MustCompile(`bottom=(\d+)`).FindSubmatch(outcome.Output)
	if match == nil {
		t.Fatalf("middle printed no bottom; output:\n%s", outcome.Output)
	}
	bottom, _ := strconv.Atoi(string(match[1]))
	for start := time.Now(); !exitedOrZombie(bottom); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 30*time.Second { // the bottom child sleeps 2 minutes
			_ = unix.Kill(bottom, unix.SIGKILL)
			t.Fatalf("bottom child %d outlived its parent", bottom)
		}
	}
}

func exitedOrZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	state := regexp.MustCompile(`\) ([A-Za-z])`).FindSubmatch(stat)
	return state != nil && (state[1][0] == 'Z' || state[1][0] == 'X')
}
