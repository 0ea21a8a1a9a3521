package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"latent.dev/admission/internal/strictjson"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// scenarioFiles lists the project's scenarios and the committed copy of
// the examples every implementation must pass.
func scenarioFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{
		"../../testdata/scenarios/*.json",
		"../../testdata/shared-scenarios/*.json",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no scenarios found")
	}
	return files
}

func TestScenariosPass(t *testing.T) {
	for _, file := range scenarioFiles(t) {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Decode(data)
			if err != nil {
				t.Fatalf("decode:\n%v", err)
			}
			results, err := s.Run()
			if err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, r := range results {
				for _, m := range r.Mismatches {
					t.Errorf("step %d (%s): %s", r.Index, r.Op, m)
				}
				if s.Steps[r.Index].Expect != nil {
					checked++
				}
				// The effective budget's wall time is what the effective
				// deadline leaves after the admission time.
				if r.Op == "admit" && r.Answer["ok"] == true {
					wall := r.Answer["budget"].(Answer)["wall_time_ms"].(int64)
					if left := r.Answer["deadline_at_ms"].(int64) - s.Steps[r.Index].At.Milliseconds(); wall != left {
						t.Errorf("step %d: budget wall time %d ms, but the deadline leaves %d ms", r.Index, wall, left)
					}
				}
			}
			if checked == 0 {
				t.Error("the scenario checks nothing")
			}
		})
	}
}

func TestCompareIsPartialAndExact(t *testing.T) {
	expect := func(doc string) *strictjson.Value {
		v, ps := strictjson.Parse([]byte(doc))
		if v == nil || len(ps) > 0 {
			t.Fatal(ps)
		}
		return v
	}
	answer := Answer{"ok": true, "generation": uint64(3), "budget": Answer{"cpu_fuel": uint64(10), "wall_time_ms": int64(5)}, "reset_at_unix_ms": nil}
	cases := []struct {
		expect string
		want   []string
	}{
		{`{}`, nil},
		{`{"ok": true}`, nil},
		{`{"generation": 3.0, "budget": {"cpu_fuel": 1e1}}`, nil},
		{`{"reset_at_unix_ms": null}`, nil},
		{`{"ok": false}`, []string{`key "ok": expected false, got true`}},
		{`{"generation": 4}`, []string{`key "generation": expected 4, got 3`}},
		{`{"budget": {"wall_time_ms": 6}}`, []string{`key "budget.wall_time_ms": expected 6, got 5`}},
		{`{"code": "x"}`, []string{`key "code": expected "x", got (absent)`}},
		{`{"generation": "3"}`, []string{`key "generation": expected "3", got 3`}},
	}
	for _, tc := range cases {
		got := Compare(expect(tc.expect), answer)
		var lines []string
		for _, m := range got {
			lines = append(lines, m.String())
		}
		if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s: got %q, want %q", tc.expect, lines, tc.want)
		}
	}
}

func TestDecodeReportsEveryProblemWithItsPath(t *testing.T) {
	data, err := os.ReadFile("../../testdata/shared-scenarios/lifecycle.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	doc = strings.Replace(doc, `"op": "release"`, `"op": "release", "bogus": 1`, 1)
	doc = strings.Replace(doc, `"at_ms": 20`, `"at_ms": 5`, 1)
	doc = strings.Replace(doc, `"op": "snapshot"`, `"op": "snap"`, 1)
	// The embedded policy and catalog are decoded by their own packages;
	// their problems keep their place in the scenario.
	doc = strings.Replace(doc, `"max_live_activations": 64,`, `"max_live_activations": "64",`, 1)
	doc = strings.Replace(doc, `"tenant": "acme",`, `"tenant": "acme", "extra": [],`, 1)
	_, err = Decode([]byte(doc))
	if err == nil {
		t.Fatal("accepted a broken scenario")
	}
	text := err.Error()
	for _, want := range []string{
		"steps[9].bogus: unknown key",
		"steps[9].at_ms: goes backwards (the previous step is at 10 ms)",
		`steps[2].op: unknown op "snap"`,
		"policy.node.limits.max_live_activations: expected a non-negative whole number, got a string",
		"catalog.deployments[0].extra: unknown key",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}

func FuzzDecodeScenario(f *testing.F) {
	for _, pattern := range []string{"../../testdata/shared-scenarios/*.json", "../../testdata/scenarios/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(`{"steps":[{"op":"admit"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			if len(strictjson.AsProblems(err)) == 0 {
				t.Fatal("an error without problems")
			}
			return
		}
		if len(s.Steps) > 50 {
			return
		}
		// A decodable scenario must run without panicking.
		_, _ = s.Run()
	})
}

// The fleet steps are strict like every other: their keys are required
// and typed, and each problem has its path.
func TestDecodeFleetSteps(t *testing.T) {
	data, err := os.ReadFile("../../testdata/scenarios/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	doc = strings.Replace(doc, `"slice": 5,`, `"slice": "5",`, 1)
	doc = strings.Replace(doc, `"valid_until_ms": 1000`, `"valid_until": 1000`, 1)
	doc = strings.Replace(doc, `"at_ms": 1700,
   "tenant": "big",`, `"at_ms": 1700,
   "tenant": 7,`, 1)
	_, err = Decode([]byte(doc))
	if err == nil {
		t.Fatal("accepted a broken scenario")
	}
	text := err.Error()
	for _, want := range []string{
		"steps[5].slice: expected a whole number, got a string",
		"steps[5].valid_until: unknown key",
		"steps[5].valid_until_ms: missing",
		"steps[31].tenant: expected a string, got a number",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}
