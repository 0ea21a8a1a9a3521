package linuxtest

import (
	"errors"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The parent names the test and the body in the child's environment; their
// presence is what makes a process an isolated child.
const (
	envTest = "LINUXTEST_ISOLATED_TEST"
	envBody = "LINUXTEST_ISOLATED_BODY"
)

// forwardedTestFlags are the test binary's own flags that change what a body
// does or where its coverage goes. The rest (-run, -count, -bench, profiles)
// describe the parent's run and would make the child run something else or
// overwrite the parent's files.
var forwardedTestFlags = []string{"test.short", "test.gocoverdir"}

// bodyRunning is set once an isolated child starts its body. A call made
// then is nested isolation, which the child cannot honour: its -test.run
// and environment name only the outer body.
var bodyRunning atomic.Bool

// Outcome is what the parent learns about a finished isolated child.
type Outcome struct {
	PID    int    // the child's process ID; the child has been reaped
	Output []byte // the child's stdout and stderr, interleaved as written
}

// RunIsolated runs body in a fresh child process and fails t if the child
// fails, hangs past deadline, or leaves a descendant holding its output.
// On a system without Linux process controls it skips t.
//
// Code before the call runs in both processes; code after it runs only in
// the parent. See Isolated for the details.
func RunIsolated(t *testing.T, name string, deadline time.Duration, body func(t *testing.T)) {
	t.Helper()
	outcome, err := Isolated(t, name, deadline, body)
	report(t, name, outcome, err)
}

// Isolated runs body in a fresh child process: a re-execution of this test
// binary that runs only t's test and, within it, only the body called name.
// It returns once the child and its process group are gone.
//
// In the parent, Isolated returns ErrTimeout if the child ran past deadline
// (it is first sent SIGQUIT so that its output holds every goroutine's
// stack), ErrChildFailed if it failed, and ErrOutputHeld if a descendant
// that left the process group kept the output open.
//
// In the child, the call that matches runs body with the child's t and ends
// the test: failed if body failed, skipped otherwise, so that the code after
// the call, written for the parent, never runs there. Calls that do not
// match return ErrOtherChild at once.
//
// name, deadline and body are required, and calls do not nest; Isolated
// panics otherwise.
func Isolated(t *testing.T, name string, deadline time.Duration, body func(t *testing.T)) (Outcome, error) {
	t.Helper()
	if name == "" || deadline <= 0 || body == nil {
		panic("linuxtest: Isolated needs a name, a positive deadline and a body")
	}
	if bodyRunning.Load() {
		panic("linuxtest: Isolated called from an isolated body; isolation does not nest")
	}
	if test, isChild := os.LookupEnv(envTest); isChild {
		if test != t.Name() || os.Getenv(envBody) != name {
			return Outcome{}, ErrOtherChild
		}
		bodyRunning.Store(true)
		body(t)
		if t.Failed() {
			t.FailNow()
		}
		t.Skip("linuxtest: body passed in the isolated child; the parent reports the test")
	}
	return spawn(childArgs(t.Name()), childEnv(t.Name(), name), deadline)
}

func report(tb testing.TB, name string, outcome Outcome, err error) {
	tb.Helper()
	switch {
	case err == nil:
		if testing.Verbose() {
			tb.Logf("linuxtest: isolated child %q (pid %d) passed; its output:\n%s", name, outcome.PID, outcome.Output)
		}
	case errors.Is(err, ErrOtherChild):
	case errors.Is(err, ErrUnsupported):
		tb.Skip(err)
	default:
		tb.Fatalf("linuxtest: isolated child %q (pid %d): %v; its output:\n%s", name, outcome.PID, err, outcome.Output)
	}
}

func childArgs(testName string) []string {
	args := []string{
		"-test.run=" + runPattern(testName),
		"-test.count=1",
		"-test.v=true",
		// A body that calls os.Exit(0) has not passed.
		"-test.paniconexit0",
	}
	// Flags the test package defines itself (a soak switch, say) reach the
	// child with the value the parent parsed.
	flag.Visit(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "test.") || slices.Contains(forwardedTestFlags, f.Name) {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	return args
}

// runPattern matches testName exactly. The testing package splits both
// -test.run and the test's name at "/", so each part is anchored alone.
func runPattern(testName string) string {
	parts := strings.Split(testName, "/")
	for i, part := range parts {
		parts[i] = "^" + regexp.QuoteMeta(part) + "$"
	}
	return strings.Join(parts, "/")
}

func childEnv(testName, bodyName string) []string {
	env := slices.DeleteFunc(os.Environ(), func(entry string) bool {
		return strings.HasPrefix(entry, envTest+"=") || strings.HasPrefix(entry, envBody+"=") ||
			strings.HasPrefix(entry, "GORACE=")
	})
	return append(env, envTest+"="+testName, envBody+"="+bodyName, "GORACE="+childRaceOptions())
}

// childRaceOptions keeps the caller's race detector options but, unless
// they say otherwise, drops the race runtime's one-second sleep at exit:
// it waits for reports from goroutines that a finished child no longer has,
// and would add a second to every passing child.
func childRaceOptions() string {
	options := os.Getenv("GORACE")
	if strings.Contains(options, "atexit_sleep_ms") {
		return options
	}
	return strings.TrimSpace(options + " atexit_sleep_ms=0")
}
