package linuxtest_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"latent.dev/admission/linuxtest"
)

// childDeadline is generous: a passing child finishes in well under a
// second, even under the race detector.
const childDeadline = 30 * time.Second

// requireGone waits for pid to be reaped or left a zombie: a killed
// grandchild is reparented to a reaper that this test does not control, so
// its zombie may linger, but it no longer runs.
func requireGone(t *testing.T, pid int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
		if unix.Kill(pid, 0) == unix.ESRCH {
			return
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The state letter follows the parenthesised command name.
		if _, rest, found := bytes.Cut(stat, []byte(") ")); found && (rest[0] == 'Z' || rest[0] == 'X') {
			return
		}
	}
	t.Fatalf("process %d still runs", pid)
}

// printedPID finds the process ID the body printed after label.
func printedPID(t *testing.T, output []byte, label string) int {
	t.Helper()
	match := regexp.MustCompile(label + `=(\d+)`).FindSubmatch(output)
	if match == nil {
		t.Fatalf("child output lacks %s; output:\n%s", label, output)
	}
	pid, err := strconv.Atoi(string(match[1]))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestRunIsolatedPassingBody(t *testing.T) {
	linuxtest.RunIsolated(t, "pass", childDeadline, func(t *testing.T) {
		t.Log("ran in the isolated child")
	})
}

func TestIsolatedRunsBodyInAnotherProcess(t *testing.T) {
	outcome, err := linuxtest.Isolated(t, "where", childDeadline, func(t *testing.T) {
		fmt.Printf("body=%d\n", os.Getpid())
	})
	if err != nil {
		t.Fatalf("Isolated: %v; output:\n%s", err, outcome.Output)
	}
	if outcome.PID == os.Getpid() || printedPID(t, outcome.Output, "body") != outcome.PID {
		t.Fatalf("body ran in %d, child was %d, parent is %d", printedPID(t, outcome.Output, "body"), outcome.PID, os.Getpid())
	}
	requireGone(t, outcome.PID)
}

func TestIsolatedReportsFailingBody(t *testing.T) {
	outcome, err := linuxtest.Isolated(t, "fail", childDeadline, func(t *testing.T) {
		t.Error("deliberate failure in the isolated child")
	})
	var exitErr *exec.ExitError
	if !errors.Is(err, linuxtest.ErrChildFailed) || !errors.As(err, &exitErr) {
		t.Fatalf("Isolated error = %v; want ErrChildFailed wrapping the exit error", err)
	}
	if !bytes.Contains(outcome.Output, []byte("deliberate failure in the isolated child")) {
		t.Errorf("output lacks the body's failure:\n%s", outcome.Output)
	}
	requireGone(t, outcome.PID)
}

func TestIsolatedTimeoutKillsTheChildAndItsGroup(t *testing.T) {
	start := time.Now()
	outcome, err := linuxtest.Isolated(t, "hang", 2*time.Second, func(t *testing.T) {
		fmt.Printf("grandchild=%d\n", startSleeper(t).Process.Pid)
		time.Sleep(time.Hour)
	})
	if !errors.Is(err, linuxtest.ErrTimeout) {
		t.Fatalf("Isolated error = %v; want ErrTimeout; output:\n%s", err, outcome.Output)
	}
	// The goroutine dump and the kill take a moment, longer on a loaded
	// machine; the child itself would sleep an hour.
	if elapsed := time.Since(start); elapsed > time.Minute {
		t.Errorf("Isolated returned after %v; want soon after the 2s deadline", elapsed)
	}
	// The child was made to dump its goroutines before it was killed.
	if !bytes.Contains(outcome.Output, []byte("SIGQUIT")) || !bytes.Contains(outcome.Output, []byte("goroutine ")) {
		t.Errorf("output lacks the goroutine dump:\n%s", outcome.Output)
	}
	if err := unix.Kill(outcome.PID, 0); err != unix.ESRCH {
		t.Errorf("kill(child, 0) = %v; want ESRCH once reaped", err)
	}
	requireGone(t, printedPID(t, outcome.Output, "grandchild"))
}

func TestIsolatedKillsWhatAPassingBodyLeftBehind(t *testing.T) {
	outcome, err := linuxtest.Isolated(t, "leave", childDeadline, func(t *testing.T) {
		fmt.Printf("grandchild=%d\n", startSleeper(t).Process.Pid)
	})
	if err != nil {
		t.Fatalf("Isolated: %v; output:\n%s", err, outcome.Output)
	}
	requireGone(t, outcome.PID)
	requireGone(t, printedPID(t, outcome.Output, "grandchild"))
}

func TestIsolatedReportsADescendantThatEscapedTheGroup(t *testing.T) {
	outcome, err := linuxtest.Isolated(t, "escape", childDeadline, func(t *testing.T) {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		escaped := exec.Command(self)
		escaped.Env = append(os.Environ(), helperEnv+"=sleep")
		escaped.Stdout = os.Stdout
		escaped.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := escaped.Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("escaped=%d\n", escaped.Process.Pid)
	})
	escaped := printedPID(t, outcome.Output, "escaped")
	// The harness cannot reach it; the test must.
	if err := unix.Kill(escaped, unix.SIGKILL); err != nil {
		t.Errorf("kill(escaped): %v", err)
	}
	if !errors.Is(err, linuxtest.ErrOutputHeld) {
		t.Fatalf("Isolated error = %v; want ErrOutputHeld; output:\n%s", err, outcome.Output)
	}
	requireGone(t, outcome.PID)
	requireGone(t, escaped)
}

func TestIsolatedRunsOneBodyPerChild(t *testing.T) {
	for _, name := range []string{"first", "second"} {
		outcome, err := linuxtest.Isolated(t, name, childDeadline, func(t *testing.T) {
			fmt.Printf("ran %s\n", name)
		})
		if errors.Is(err, linuxtest.ErrOtherChild) {
			continue // in the child for the other body
		}
		if err != nil {
			t.Fatalf("Isolated(%s): %v; output:\n%s", name, err, outcome.Output)
		}
		if got := strings.Count(string(outcome.Output), "ran "); got != 1 || !bytes.Contains(outcome.Output, []byte("ran "+name)) {
			t.Errorf("child for %s ran %d bodies; output:\n%s", name, got, outcome.Output)
		}
	}
}

func TestIsolatedInASubtest(t *testing.T) {
	t.Run("names with spaces/and slashes", func(t *testing.T) {
		linuxtest.RunIsolated(t, "sub", childDeadline, func(t *testing.T) {
			if !strings.HasSuffix(t.Name(), "/names_with_spaces/and_slashes") {
				t.Errorf("child runs %s", t.Name())
			}
		})
	})
}

func TestIsolatedPanicsWhenNested(t *testing.T) {
	outcome, err := linuxtest.Isolated(t, "outer", childDeadline, func(t *testing.T) {
		defer func() { fmt.Printf("nested call panicked: %v\n", recover()) }()
		linuxtest.RunIsolated(t, "inner", childDeadline, func(t *testing.T) {})
	})
	if err != nil {
		t.Fatalf("Isolated: %v; output:\n%s", err, outcome.Output)
	}
	if !bytes.Contains(outcome.Output, []byte("nested call panicked: linuxtest: Isolated called from an isolated body")) {
		t.Fatalf("nested call did not panic; output:\n%s", outcome.Output)
	}
}
