package main

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// withStdin runs f with standard input replaced by r.
func withStdin(t *testing.T, r io.Reader) {
	t.Helper()
	old := stdin
	stdin = r
	t.Cleanup(func() { stdin = old })
}

// endlessZeros is an input that never ends.
type endlessZeros struct{}

func (endlessZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// allocatedBy is how many bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// oversized returns a sparse file of 1 GiB.
func oversized(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	return path
}

// An input beyond the size limit, or endless, is refused with exit status
// 3 and one line naming it, after reading no more than the limit.
func TestOversizedInputExitsThree(t *testing.T) {
	huge := oversized(t)
	const tooLarge = ": input exceeds 8388608 bytes\n"
	cases := []struct {
		name   string
		args   []string
		stdin  io.Reader
		stderr string
	}{
		{"validate policy, a 1 GiB file", []string{"validate", "policy", huge}, nil, huge + tooLarge},
		{"validate policy, endless standard input", []string{"validate", "policy", "-"}, endlessZeros{}, "standard input" + tooLarge},
		{"validate catalog, a 1 GiB file", []string{"validate", "catalog", huge}, nil, huge + tooLarge},
		{"validate catalog, a 1 GiB policy", []string{"validate", "catalog", goodCatalog, "--policy", huge}, nil, huge + tooLarge},
		{"replay, a 1 GiB file", []string{"replay", "--check", huge}, nil, huge + tooLarge},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct {
			name   string
			args   []string
			stdin  io.Reader
			stderr string
		}{"validate policy, /dev/zero", []string{"validate", "policy", "/dev/zero"}, nil, "/dev/zero" + tooLarge})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.stdin != nil {
				withStdin(t, c.stdin)
			}
			var code int
			var stdout, stderr string
			allocated := allocatedBy(func() { code, stdout, stderr = runCommand(t, c.args...) })
			if code != exitUnreadable || stdout != "" || stderr != c.stderr {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, nothing, %q", code, stdout, stderr, exitUnreadable, c.stderr)
			}
			// At most the limit is read, into a buffer that doubles: under
			// twice the limit in all; a large regular file is not read.
			if limit := uint64(2*strictjson.MaxDocumentBytes + 1<<20); allocated > limit {
				t.Errorf("allocated %d bytes, more than %d", allocated, limit)
			}
		})
	}
}

// A document of exactly the limit is read and judged on its content.
func TestInputOfExactlyTheLimitIsRead(t *testing.T) {
	data, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	padded := append(data, strings.Repeat(" ", strictjson.MaxDocumentBytes-len(data))...)
	withStdin(t, strings.NewReader(string(padded)))
	if code, stdout, stderr := runCommand(t, "validate", "policy", "-"); code != exitOK || stdout != "ok\n" || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// plainText reports why a line is not plain, printable text, or "".
func plainText(line string) string {
	if !utf8.ValidString(line) {
		return "is not valid UTF-8"
	}
	for _, r := range line {
		if r != ' ' && !unicode.IsPrint(r) {
			return "holds " + strictjson.JoinKey("", string(r))
		}
	}
	return ""
}

// The keys of a policy are printed escaped: a key that would rewrite the
// terminal line to read "ok" prints as its escapes, and each problem is one
// line.
func TestValidatePolicyPrintsKeysEscaped(t *testing.T) {
	const attack = `\u001b[2K\rok\n\u0000\u202e`
	file := writePolicy(t,
		`"maximum_identifier_bytes": 64,`, `"maximum_identifier_bytes": 64, "`+attack+`": 1, "`+attack+`": {"\u0007": 2},`,
		`"tenants": [`, `"tenants": [{"id": "x\u001b]0;t\u0007", "`+attack+`": true}, `,
	)
	code, stdout, stderr := runCommand(t, "validate", "policy", file)
	if code != exitProblems || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, decodeErr := policy.DecodePolicy(data)
	problems := strictjson.AsProblems(decodeErr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(problems) {
		t.Fatalf("%d lines for %d problems:\n%s", len(lines), len(problems), stdout)
	}
	for i, line := range lines {
		if why := plainText(line); why != "" {
			t.Errorf("line %d %s: %q", i+1, why, line)
		}
		if line == "ok" || !strings.Contains(line, ": ") {
			t.Errorf("line %d is not one problem: %q", i+1, line)
		}
	}
	for _, want := range []string{
		`node["\u001b[2K\rok\n\u0000\u202e"]: duplicate key`,
		`node["\u001b[2K\rok\n\u0000\u202e"]: unknown key`,
		`tenants[0]["\u001b[2K\rok\n\u0000\u202e"]: unknown key`,
	} {
		if !strings.Contains(stdout, want+"\n") {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// A file name is printed escaped too.
func TestUnreadableFileNameIsEscaped(t *testing.T) {
	name := filepath.Join(t.TempDir(), "a\nb\x1b[31m.json")
	code, stdout, stderr := runCommand(t, "validate", "policy", name)
	if code != exitUnreadable || stdout != "" || strings.Count(stderr, "\n") != 1 || plainText(strings.TrimSuffix(stderr, "\n")) != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want one escaped line", code, stdout, stderr)
	}
	if !strings.Contains(stderr, `a\nb\u001b[31m.json: no such file or directory`) {
		t.Errorf("stderr %q", stderr)
	}
}

func TestStandardInput(t *testing.T) {
	data, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	withStdin(t, strings.NewReader(string(data)))
	if code, stdout, _ := runCommand(t, "validate", "policy", "-"); code != exitOK || stdout != "ok\n" {
		t.Errorf("validate policy -: exit %d, stdout %q", code, stdout)
	}
}

// Replay exits 3 when any input is unreadable, even when another has
// problems, so a script can tell the two apart.
func TestReplayUnreadableWinsOverProblems(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.json")
	if code, _, _ := runCommand(t, "replay", "-q", bad); code != exitProblems {
		t.Errorf("a file with problems: exit %d", code)
	}
	if code, _, stderr := runCommand(t, "replay", "-q", bad, missing); code != exitUnreadable || !strings.Contains(stderr, missing+": no such file or directory\n") {
		t.Errorf("with a missing file too: exit %d, stderr %q", code, stderr)
	}
}

// The usage text documents the exit statuses.
func TestUsageDocumentsExitStatuses(t *testing.T) {
	_, _, stderr := runCommand(t)
	if !strings.Contains(stderr, "exit status: 0 ok, 1 problems found, 2 misuse, 3 unreadable or oversized input") {
		t.Errorf("usage = %q", stderr)
	}
}

// Validating a policy allocates in proportion to the file, for the shapes
// that were quadratic: a long key above a large array (in the file's
// valid keys, and unknown), and long numbers.
func TestValidatePolicyAllocatesLinearly(t *testing.T) {
	base, err := os.ReadFile(examplePolicy)
	if err != nil {
		t.Fatal(err)
	}
	shapes := []struct {
		name   string
		insert func(n int) string // placed after "maximum_identifier_bytes": 64,
	}{
		{"a long unknown key above an array of duplicates", func(n int) string {
			return `"` + strings.Repeat("k", n) + `": [` + strings.Repeat(`{"a":1,"a":2},`, n) + `{}],`
		}},
		{"a long unknown key above an array", func(n int) string {
			return `"` + strings.Repeat("k", n) + `": [` + strings.Repeat("0,", n) + `0],`
		}},
		{"long numbers", func(n int) string {
			number := strings.Repeat("9", strictjson.MaxNumberDigits-2) + ".0"
			return `"numbers": [` + strings.Repeat(number+",", n/100) + `0],`
		}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			perByte := func(n int) float64 {
				doc := strings.Replace(string(base), `"maximum_identifier_bytes": 64,`, `"maximum_identifier_bytes": 64, `+s.insert(n), 1)
				withStdin(t, strings.NewReader(doc))
				var code int
				allocated := allocatedBy(func() { code, _, _ = runCommand(t, "validate", "policy", "-") })
				if code != exitProblems {
					t.Fatalf("exit %d", code)
				}
				return float64(allocated) / float64(len(doc))
			}
			small, large := perByte(20_000), perByte(200_000)
			t.Logf("%.1f bytes allocated per input byte at 20,000, %.1f at 200,000", small, large)
			if large > 1.25*small+2 || large > 100 {
				t.Errorf("allocation grows with the input: %.1f bytes per input byte at 20,000, %.1f at 200,000", small, large)
			}
		})
	}
}
