package main

import (
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

func TestScore(t *testing.T) {
	mutants, err := parseGremlins(strings.NewReader(results), "core/deadline")
	if err != nil {
		t.Fatal(err)
	}
	if len(mutants) != 6 || mutants[0].Key() != "core/deadline/deadline.go:66:17 CONDITIONALS_NEGATION" {
		t.Fatalf("mutants %+v", mutants)
	}
	list, err := parseEquivalents(strings.NewReader(`# known equivalents
core/deadline/deadline.go:88:15 CONDITIONALS_BOUNDARY — the two answers agree at equality

policy/identifier.go:1:1 ARITHMETIC_BASE — another package's entry
core/deadline/clock.go:9:9 ARITHMETIC_BASE — no longer there
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
	if len(s.Stale) != 1 || s.Stale[0].Key != "core/deadline/clock.go:9:9 ARITHMETIC_BASE" {
		t.Fatalf("stale %+v", s.Stale)
	}
	if got := s.Percent(); got != 50 {
		t.Fatalf("percent %v, want 50", got)
	}
}

func TestScoreOfNothingIsFull(t *testing.T) {
	s, err := score("p", nil, nil)
	if err != nil || s.Percent() != 100 {
		t.Fatalf("%v %v", s, err)
	}
}

func TestDryRunIsNotScored(t *testing.T) {
	list := map[string]Equivalent{"p/a.go:2:2 X": {Key: "p/a.go:2:2 X", File: "p/a.go"}}
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
		"core/a.go:1:1 ARITHMETIC_BASE",
		"core/a.go:1:1 ARITHMETIC_BASE because",
		"core/a.go:1:1 ARITHMETIC_BASE —",
		"core/a.go:1 ARITHMETIC_BASE — reason",
		"core/a.go:x:1 ARITHMETIC_BASE — reason",
		"core/a.go:0:1 ARITHMETIC_BASE — reason",
		":1:1 ARITHMETIC_BASE — reason",
		"core/a.go:1:1 ARITHMETIC_BASE — reason\ncore/a.go:1:1 ARITHMETIC_BASE — twice",
	} {
		if _, err := parseEquivalents(strings.NewReader(text)); err == nil {
			t.Errorf("accepted %q", text)
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
