package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// runCommand runs admissionctl with args and returns its exit code and
// what it wrote to stdout and stderr.
func runCommand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// Misuse exits 2 with a usage message on stderr and nothing on stdout.
func TestMisuseExitsTwo(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string // a substring
	}{
		{"no command", nil, "usage: admissionctl COMMAND"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"validate without a kind", []string{"validate"}, "usage: admissionctl validate KIND FILE"},
		{"validate an unknown kind", []string{"validate", "spreadsheet", "x"}, `unknown kind "spreadsheet"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, c.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, c.stderr)
			}
		})
	}
}

// The usage message lists the validate kinds, so an operator who mistyped
// one learns the right name.
func TestUsageListsValidateKinds(t *testing.T) {
	_, _, stderr := runCommand(t)
	if !strings.Contains(stderr, "validate") || !strings.Contains(stderr, "policy") {
		t.Errorf("usage = %q, want it to name validate and policy", stderr)
	}
}
