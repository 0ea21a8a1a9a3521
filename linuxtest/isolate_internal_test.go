package linuxtest

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// forwardedFlag stands for a switch a test package defines itself, such as
// one that turns on a long soak.
var forwardedFlag = flag.String("linuxtest-forwarded", "", "checks that package flags reach isolated children")

func TestRunPatternMatchesOnlyTheNamedTest(t *testing.T) {
	tests := []struct {
		name     string
		testName string
		want     string
	}{
		{"a top-level test is anchored", "TestFlat", "^TestFlat$"},
		{"each subtest level is anchored alone", "TestFlat/small/1000", "^TestFlat$/^small$/^1000$"},
		{"regexp syntax in a name is literal", "TestFlat/a+b(c)", `^TestFlat$/^a\+b\(c\)$`},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if got := runPattern(test.testName); got != test.want {
				t.Fatalf("runPattern(%q) = %q; want %q", test.testName, got, test.want)
			}
			for _, part := range strings.Split(runPattern(test.testName), "/") {
				if _, err := regexp.Compile(part); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestChildArgsForwardPackageFlagsButNotTheParentsRun(t *testing.T) {
	previous := *forwardedFlag
	if err := flag.Set("linuxtest-forwarded", "soak"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { *forwardedFlag = previous })

	args := childArgs("TestFlat")
	if !slices.Contains(args, "-linuxtest-forwarded=soak") {
		t.Errorf("childArgs = %q; want the package flag forwarded", args)
	}
	runs := 0
	for _, arg := range args {
		if strings.HasPrefix(arg, "-test.run=") {
			runs++
		}
		if strings.HasPrefix(arg, "-test.") && !slices.ContainsFunc(
			[]string{"-test.run=", "-test.count=", "-test.v=", "-test.paniconexit0", "-test.short=", "-test.gocoverdir="},
			func(prefix string) bool { return strings.HasPrefix(arg, prefix) }) {
			t.Errorf("childArgs forwards the parent's %q", arg)
		}
	}
	if runs != 1 || args[0] != "-test.run=^TestFlat$" {
		t.Errorf("childArgs = %q; want exactly one -test.run, for TestFlat", args)
	}
}

func TestChildEnvReplacesInheritedMarkers(t *testing.T) {
	t.Setenv(envTest, "TestOuter")
	t.Setenv(envBody, "outer")
	env := childEnv("TestInner", "inner")
	var markers []string
	for _, entry := range env {
		if strings.HasPrefix(entry, "LINUXTEST_ISOLATED_") {
			markers = append(markers, entry)
		}
	}
	want := []string{envTest + "=TestInner", envBody + "=inner"}
	if !slices.Equal(markers, want) {
		t.Fatalf("markers = %q; want %q", markers, want)
	}
}

func TestChildEnvKeepsRaceOptions(t *testing.T) {
	tests := []struct {
		name   string
		parent string
		want   string
	}{
		{"no options drop the exit sleep", "", "atexit_sleep_ms=0"},
		{"other options are kept", "halt_on_error=1", "halt_on_error=1 atexit_sleep_ms=0"},
		{"an exit sleep the caller chose is kept", "atexit_sleep_ms=50", "atexit_sleep_ms=50"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			t.Setenv("GORACE", test.parent)
			env := childEnv("TestFlat", "flat")
			if got := slices.DeleteFunc(env, func(e string) bool { return !strings.HasPrefix(e, "GORACE=") }); !slices.Equal(got, []string{"GORACE=" + test.want}) {
				t.Fatalf("GORACE entries = %q; want %q", got, test.want)
			}
		})
	}
}

// recordingTB stands in for the parent's t so that a failing report can be
// observed without failing this test.
type recordingTB struct {
	testing.TB
	fatal   string
	skipped bool
}

func (r *recordingTB) Helper()                      {}
func (r *recordingTB) Logf(string, ...any)          {}
func (r *recordingTB) Skip(...any)                  { r.skipped = true }
func (r *recordingTB) Fatalf(f string, args ...any) { r.fatal = fmt.Sprintf(f, args...) }

func TestReport(t *testing.T) {
	failed := Outcome{PID: 4242, Output: []byte("--- FAIL: TestFlat\n    flat_test.go:9: descriptors rose")}
	t.Run("a failed child fails the test with its output", func(t *testing.T) {
		var tb recordingTB
		report(&tb, "flat", failed, fmt.Errorf("%w: exit status 1", ErrChildFailed))
		for _, want := range []string{`"flat"`, "pid 4242", "exit status 1", "descriptors rose"} {
			if !strings.Contains(tb.fatal, want) {
				t.Errorf("report = %q; want it to hold %q", tb.fatal, want)
			}
		}
	})
	t.Run("a timed-out child fails the test", func(t *testing.T) {
		var tb recordingTB
		report(&tb, "flat", failed, ErrTimeout)
		if !strings.Contains(tb.fatal, ErrTimeout.Error()) {
			t.Errorf("report = %q; want the timeout", tb.fatal)
		}
	})
	t.Run("a passing child passes", func(t *testing.T) {
		var tb recordingTB
		report(&tb, "flat", Outcome{}, nil)
		if tb.fatal != "" || tb.skipped {
			t.Errorf("report failed or skipped a passing child: %q", tb.fatal)
		}
	})
	t.Run("another child's body is no failure", func(t *testing.T) {
		var tb recordingTB
		report(&tb, "flat", Outcome{}, ErrOtherChild)
		if tb.fatal != "" || tb.skipped {
			t.Errorf("report failed or skipped another child's body: %q", tb.fatal)
		}
	})
	t.Run("an unsupported system skips", func(t *testing.T) {
		var tb recordingTB
		report(&tb, "flat", Outcome{}, ErrUnsupported)
		if tb.fatal != "" || !tb.skipped {
			t.Errorf("report did not skip on an unsupported system")
		}
	})
}

func TestErrUnsupportedIsTheStandardLibrarysToo(t *testing.T) {
	if !errors.Is(ErrUnsupported, errors.ErrUnsupported) {
		t.Fatal("ErrUnsupported does not wrap errors.ErrUnsupported")
	}
}
