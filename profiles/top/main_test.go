package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPrintTopRanksByFlatValue builds a two-stack profile by hand:
// leaf() is called from both stacks, so it has the most flat time, and
// main.main is on both, so it has all the cumulative time.
func TestPrintTopRanksByFlatValue(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	mainFn, leaf, other := fn(1, "main.main"), fn(2, "pkg.leaf"), fn(3, "pkg.other")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lMain, lLeaf, lOther := loc(1, mainFn), loc(2, leaf), loc(3, other)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{mainFn, leaf, other},
		Location:   []*profile.Location{lMain, lLeaf, lOther},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lLeaf, lMain}, Value: []int64{1, 70}},
			{Location: []*profile.Location{lOther, lMain}, Value: []int64{1, 30}},
		},
	}
	file := filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var out bytes.Buffer
	if err := printTop(&out, file, 3); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("got:\n%s", out.String())
	}
	for i, want := range []string{"cpu (nanoseconds), total 100", "70.0%", "30.0%", "main.main"} {
		line := lines[min(i, len(lines)-1)]
		if i > 0 {
			line = lines[i+1]
		}
		if !strings.Contains(line, want) {
			t.Errorf("line %d %q lacks %q", i, line, want)
		}
	}
	if !strings.Contains(lines[4], "100.0%") {
		t.Errorf("main.main should have all the cumulative time: %q", lines[4])
	}
}
