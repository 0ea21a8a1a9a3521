package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const results = `{"go_module":"latent.dev/admission","files":[
 {"file_name":"deadline.go","mutations":[
  {"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":66,"column":34},
  {"type":"CONDITIONALS_NEGATION","status":"KILLED","line":66,"column":17},
  {"type":"ARITHMETIC_BASE","status":"TIMED OUT","line":73,"column":19},
  {"type":"ARITHMETIC_BASE","status":"NOT COVERED","line":99,"column":11},
  {"type":"INVERT_NEGATIVES","status":"NOT VIABLE","line":96,"column":22},
  {"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":88,"column":15}]}]}`

// deadlineSrc stands in for core/deadline/deadline.go in the tests: the
// lines the results below name, at the lines they name.
func deadlineSrc(above int) string {
	lines := make([]string, 100)
	for i := range lines {
		lines[i] = "\t// filler"
	}
	lines[65] = "\tif aaaaaaaaaaa == 0 && bbbbbbbb < c {"
	lines[72] = "\treturn a - b"
	lines[87] = "\t\t\t\tif len(s) > n {"
	lines[95] = "\tv := -1"
	lines[98] = "\tw := x + y"
	return strings.Repeat("// inserted\n", above) + strings.Join(lines, "\n") + "\n"
}

// writeModule writes files (path relative to the root: content) under a
// temporary module root and returns it.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		file := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestScore(t *testing.T) {
	mutants, err := parseGremlins(strings.NewReader(results), "core/deadline")
	if err != nil {
		t.Fatal(err)
	}
	if len(mutants) != 6 || mutants[0].Key() != "core/deadline/deadline.go:66:17 CONDITIONALS_NEGATION" {
		t.Fatalf("mutants %+v", mutants)
	}
	root := writeModule(t, map[string]string{"core/deadline/deadline.go": deadlineSrc(0)})
	if err := locate(root, mutants); err != nil {
		t.Fatal(err)
	}
	list, err := parseEquivalents(strings.NewReader(`# known equivalents
core/deadline/deadline.go CONDITIONALS_BOUNDARY 11 "if len(s) > n {" — the two answers agree at equality

policy/identifier.go ARITHMETIC_BASE 1 "x - y" — another package's entry
core/deadline/clock.go ARITHMETIC_BASE 3 "a + b" — no longer there
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := score("core/deadline", mutants, list)
	if err != nil {
		t.Fatal(err)
	}
	if s.Killed != 2 || s.TimedOut != 1 || s.NotViable != 1 || len(s.Equivalent) != 1 {
		t.Fatalf("score %+v", s)
	}
	if len(s.Survivors) != 2 || s.Survivors[0].Key() != "core/deadline/deadline.go:66:34 CONDITIONALS_BOUNDARY" ||
		s.Survivors[1].Status != statusNotCovered {
		t.Fatalf("survivors %+v", s.Survivors)
	}
	if s.Survivors[0].Text != "if aaaaaaaaaaa == 0 && bbbbbbbb < c {" || s.Survivors[0].TextColumn != 33 {
		t.Fatalf("survivor located at %q column %d", s.Survivors[0].Text, s.Survivors[0].TextColumn)
	}
	if len(s.Stale) != 1 || s.Stale[0].File != "core/deadline/clock.go" {
		t.Fatalf("stale %+v", s.Stale)
	}
	if got := s.Percent(); got != 50 {
		t.Fatalf("percent %v, want 50", got)
	}
}

// listedSurvivor scores one surviving mutant of p/a.go at line:col (as
// gremlins would report it for src) against one entry.
func listedSurvivor(t *testing.T, src string, line, col int, entry string) *Score {
	t.Helper()
	root := writeModule(t, map[string]string{"p/a.go": src})
	mutants := []Mutant{{File: "p/a.go", Line: line, Column: col, Type: "CONDITIONALS_BOUNDARY", Status: statusLived}}
	if err := locate(root, mutants); err != nil {
		t.Fatal(err)
	}
	list, err := parseEquivalents(strings.NewReader(entry))
	if err != nil {
		t.Fatal(err)
	}
	s, err := score("p", mutants, list)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestAnEntryFollowsItsLineWhenCodeMovesAboveIt(t *testing.T) {
	const entry = `p/a.go CONDITIONALS_BOUNDARY 11 "if len(s) > n {" — equal lengths agree`
	// The entry as written: the mutant at line 88, column 13.
	s := listedSurvivor(t, deadlineSrc(0), 88, 15, entry)
	if len(s.Equivalent) != 1 || len(s.Survivors) != 0 || len(s.Stale) != 0 {
		t.Fatalf("before the move: %+v", s)
	}
	// Seven lines inserted above: gremlins now reports line 95.
	s = listedSurvivor(t, deadlineSrc(7), 95, 15, entry)
	if len(s.Equivalent) != 1 || len(s.Survivors) != 0 || len(s.Stale) != 0 {
		t.Fatalf("after inserting lines above: %+v", s)
	}
	// Indented one level deeper: the column moves, the entry does not.
	src := strings.Replace(deadlineSrc(3), "\t\t\t\tif len(s) > n {", "\t\t\t\t\tif len(s) > n {", 1)
	s = listedSurvivor(t, src, 91, 16, entry)
	if len(s.Equivalent) != 1 || len(s.Survivors) != 0 || len(s.Stale) != 0 {
		t.Fatalf("after re-indenting: %+v", s)
	}
}

func TestAnEntryWhoseLineWasEditedIsStale(t *testing.T) {
	const entry = `p/a.go CONDITIONALS_BOUNDARY 11 "if len(s) > n {" — equal lengths agree`
	src := strings.Replace(deadlineSrc(2), "if len(s) > n {", "if len(s) > n+1 {", 1)
	s := listedSurvivor(t, src, 90, 15, entry)
	if len(s.Equivalent) != 0 || len(s.Survivors) != 1 {
		t.Fatalf("the edited line's mutant was excused: %+v", s)
	}
	if len(s.Stale) != 1 || s.Stale[0].Text != "if len(s) > n {" || s.Stale[0].Line != 1 {
		t.Fatalf("stale %+v", s.Stale)
	}
	var out strings.Builder
	report(&out, s)
	for _, want := range []string{`STALE       p/a.go CONDITIONALS_BOUNDARY 11 "if len(s) > n {" (list line 1)`,
		`as a list entry: p/a.go CONDITIONALS_BOUNDARY 11 "if len(s) > n+1 {" — REASON`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestAnEntryMatchesOnlyItsColumn(t *testing.T) {
	// The same line, another operator on it: not the listed mutant.
	s := listedSurvivor(t, deadlineSrc(0), 66, 34, `p/a.go CONDITIONALS_BOUNDARY 16 "if aaaaaaaaaaa == 0 && bbbbbbbb < c {" — another operator of the line`)
	if len(s.Equivalent) != 0 || len(s.Survivors) != 1 || len(s.Stale) != 1 {
		t.Fatalf("%+v", s)
	}
}

func TestScoreOfNothingIsFull(t *testing.T) {
	s, err := score("p", nil, nil)
	if err != nil || s.Percent() != 100 {
		t.Fatalf("%v %v", s, err)
	}
}

func TestDryRunIsNotScored(t *testing.T) {
	e := &Equivalent{File: "p/a.go", Type: "X", Column: 1, Text: "a"}
	list := map[string]*Equivalent{e.Key(): e}
	s, err := score("p", []Mutant{{File: "p/a.go", Line: 1, Column: 1, Type: "X", Status: statusRunnable}}, list)
	if err != nil || s.NotRun != 1 || s.Killed != 0 || len(s.Survivors) != 0 || len(s.Stale) != 0 {
		t.Fatalf("%+v %v", s, err)
	}
}

func TestScoreRefusesAnUnknownStatus(t *testing.T) {
	if _, err := score("p", []Mutant{{File: "p/a.go", Line: 1, Column: 1, Type: "X", Status: "PENDING"}}, nil); err == nil {
		t.Fatal("unknown status accepted")
	}
}

func TestParseEquivalentsRefusesMalformedEntries(t *testing.T) {
	for _, text := range []string{
		`core/a.go ARITHMETIC_BASE 1 "a - b"`,
		`core/a.go ARITHMETIC_BASE 1 "a - b" because`,
		`core/a.go ARITHMETIC_BASE 1 "a - b" —`,
		`core/a.go ARITHMETIC_BASE 1 a - b — reason`,
		`core/a.go ARITHMETIC_BASE x "a - b" — reason`,
		`core/a.go ARITHMETIC_BASE 0 "a - b" — reason`,
		`core/a.go ARITHMETIC_BASE 6 "a - b" — reason`,
		`core/a.go ARITHMETIC_BASE 1 " a - b" — reason`,
		`core/a.go ARITHMETIC_BASE 1 "" — reason`,
		`core/a.go:1:1 ARITHMETIC_BASE — reason`,
		`core/a.go ARITHMETIC_BASE 3 "a - b" — reason` + "\n" + `core/a.go ARITHMETIC_BASE 3 "a - b" — twice`,
	} {
		if _, err := parseEquivalents(strings.NewReader(text)); err == nil {
			t.Errorf("accepted %q", text)
		}
	}
	list, err := parseEquivalents(strings.NewReader(`core/a.go CONDITIONALS_NEGATION 5 "x := \"—\" == y — z" — a dash in the text and the reason — both kept`))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		if e.Text != `x := "—" == y — z` || e.Reason != "a dash in the text and the reason — both kept" || e.Column != 5 {
			t.Fatalf("parsed %+v", e)
		}
	}
}

func TestMutateAppliesGremlinsTokenChanges(t *testing.T) {
	src := []byte("package p\n\nconst a = b - 1\n\nfunc f() bool { return x >= y && z == w }\n")
	cases := []struct {
		line, col int
		mutator   string
		want      string
	}{
		{3, 13, "ARITHMETIC_BASE", "const a = b + 1"},
		{3, 13, "INVERT_NEGATIVES", "const a = b + 1"},
		{5, 26, "CONDITIONALS_BOUNDARY", "return x > y && z == w"},
		{5, 26, "CONDITIONALS_NEGATION", "return x < y && z == w"},
		{5, 36, "CONDITIONALS_NEGATION", "return x >= y && z != w"},
	}
	for _, c := range cases {
		out, err := mutate(src, c.line, c.col, c.mutator)
		if err != nil {
			t.Fatalf("%d:%d %s: %v", c.line, c.col, c.mutator, err)
		}
		if !strings.Contains(string(out), c.want) || len(out) > len(src)+1 {
			t.Errorf("%d:%d %s: got\n%s", c.line, c.col, c.mutator, out)
		}
	}
	for _, bad := range []struct {
		line, col int
		mutator   string
	}{{3, 1, "ARITHMETIC_BASE"}, {9, 1, "ARITHMETIC_BASE"}, {3, 13, "INVERT_BITWISE"}, {3, 200, "ARITHMETIC_BASE"}} {
		if _, err := mutate(src, bad.line, bad.col, bad.mutator); err == nil {
			t.Errorf("%d:%d %s: mutated", bad.line, bad.col, bad.mutator)
		}
	}
}

// TestTheListNamesLinesThatExist holds the committed list to the code:
// each entry's line text is in its file and the mutator changes the
// operator at its column. `make mutants` would report such an entry
// stale after minutes of mutation; this finds it in CI at once.
func TestTheListNamesLinesThatExist(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	list, err := readEquivalents(filepath.Join(root, "testdata", "mutants-equivalent.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		t.Fatal("the list is empty")
	}
	for _, e := range list {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.File)))
		if err != nil {
			t.Errorf("list line %d: %v", e.Line, err)
			continue
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			if strings.TrimSpace(line) == e.Text {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("list line %d: %s: no line of %s reads %q (edited or removed: update the list)", e.Line, e.Type, e.File, e.Text)
			continue
		}
		if _, err := mutate([]byte(e.Text), 1, e.Column, e.Type); err != nil {
			t.Errorf("list line %d: %s at column %d of %q: %v", e.Line, e.Type, e.Column, e.Text, err)
		}
	}
}
