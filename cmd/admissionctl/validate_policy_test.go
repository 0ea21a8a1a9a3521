package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const examplePolicy = "../../testdata/policy/node.json"

// writePolicy writes the example policy with each old string replaced
// once, and returns the file's path.
func writePolicy(t *testing.T, replacements ...string) string {
	t.Helper()
	data, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for i := 0; i+1 < len(replacements); i += 2 {
		if n := strings.Count(text, replacements[i]); n != 1 {
			t.Fatalf("%q occurs %d times in %s", replacements[i], n, examplePolicy)
		}
		text = strings.Replace(text, replacements[i], replacements[i+1], 1)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestValidatePolicyAcceptsTheExample(t *testing.T) {
	code, stdout, stderr := runCommand(t, "validate", "policy", examplePolicy)
	if code != 0 || stdout != "ok\n" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, \"ok\\n\", nothing", code, stdout, stderr)
	}
}

func TestValidatePolicyListsEveryProblem(t *testing.T) {
	file := writePolicy(t,
		`"wall_time_ms": 30000`, `"wall_time_ms": 0`,
		`"id": "initech"`, `"id": "acme"`,
		`"max_queued_reservations": 0,`, `"max_queued_reservations": -1,`,
		`"maximum_identifier_bytes": 64,`, `"maximum_identifier_bytes": 64, "colour": "blue",`,
	)
	code, stdout, stderr := runCommand(t, "validate", "policy", file)
	const want = "node.colour: unknown key\n" +
		"tenants[3].limits.max_queued_reservations: must not be negative\n" +
		"node.budget_ceiling.wall_time_ms: must be positive\n" +
		"tenants[2].id: duplicates tenants[0]\n"
	if code != 1 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant exit 1, no stderr, stdout:\n%s", code, stderr, stdout, want)
	}
}

func TestValidatePolicySyntaxError(t *testing.T) {
	file := writePolicy(t, `"tenants": [`, `"tenants": [,`)
	code, stdout, stderr := runCommand(t, "validate", "policy", file)
	if code != 1 || !strings.HasPrefix(stdout, "invalid JSON at byte ") || strings.Count(stdout, "\n") != 1 || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one invalid JSON line", code, stdout, stderr)
	}
}

func TestValidatePolicyUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	for name, file := range map[string]string{
		"missing file": filepath.Join(dir, "absent.json"),
		"directory":    dir,
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, "validate", "policy", file)
			if code != exitUnreadable {
				t.Errorf("exit code %d, want %d", code, exitUnreadable)
			}
			if stdout != "" || !strings.HasPrefix(stderr, file+": ") || strings.Count(stderr, "\n") != 1 {
				t.Errorf("stdout %q, stderr %q; want one line on stderr naming %s", stdout, stderr, file)
			}
		})
	}
}

func TestValidatePolicyMisuse(t *testing.T) {
	for name, args := range map[string][]string{
		"no file":   {"validate", "policy"},
		"two files": {"validate", "policy", examplePolicy, examplePolicy},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, args...)
			if code != 2 || stdout != "" || stderr != "usage: admissionctl validate policy FILE\n" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and the usage line", code, stdout, stderr)
			}
		})
	}
}
