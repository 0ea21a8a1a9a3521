package runner_test

import (
	"testing"

	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// Count splits the outcome counters by what became of the cell: each
// activation is counted once, under its outcome and disposition, and
// Stats is the sum of the pairs.
func TestCountIsByOutcomeAndDisposition(t *testing.T) {
	n, pool, _ := setup(t)
	r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": synthetic.New(func(g *runner.Guest) synthetic.Behavior {
		switch string(g.Input) {
		case "trap":
			return synthetic.Behavior{Exit: runner.ExitTrapped}
		case "dirty":
			return synthetic.Behavior{UncertainCleanup: true}
		}
		return synthetic.Behavior{}
	})}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"ok", "ok", "trap", "dirty"} {
		exec, lease := started(t, n, pool, nodetest.Ask{}, policy.Tiny)
		a := r.NewActivation([]byte(in))
		grant := exec.Grant()
		a.Run(t.Context(), &grant, lease)
		exec.Release() // as the scheduler does after Run
		a.End(nil)
		if _, err := a.Wait(t.Context()); err != nil && in != "trap" {
			t.Fatalf("%s: %v", in, err)
		}
	}
	want := map[[2]int]int64{
		{int(runner.Succeeded), int(runner.Released)}:    2,
		{int(runner.Trapped), int(runner.Released)}:      1,
		{int(runner.Succeeded), int(runner.Quarantined)}: 1,
	}
	for _, o := range append(runner.Outcomes(), runner.NotRun, runner.Outcome(200)) {
		for _, d := range []runner.Disposition{runner.NoCell, runner.Released, runner.Quarantined} {
			if got := r.Count(o, d); got != want[[2]int{int(o), int(d)}] {
				t.Errorf("Count(%v, %v) = %d, want %d", o, d, got, want[[2]int{int(o), int(d)}])
			}
		}
	}
	s := r.Stats()
	if s.Released != 3 || s.Quarantined != 1 || len(s.Outcomes) != 2 || s.Outcomes[runner.Succeeded] != 3 || s.Outcomes[runner.Trapped] != 1 {
		t.Errorf("stats %+v", s)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.Count(runner.Succeeded, runner.Released) }); allocs != 0 {
		t.Errorf("Count allocates %v times, want 0", allocs)
	}
}

// Outcomes lists every terminal outcome once, NotRun excluded.
func TestOutcomesListsTheTerminalOutcomes(t *testing.T) {
	got := runner.Outcomes()
	want := []runner.Outcome{runner.Succeeded, runner.DeclaredError, runner.Trapped, runner.DeadlineExceeded, runner.FuelExhausted,
		runner.MemoryExhausted, runner.Canceled, runner.PlatformFailure}
	if len(got) != len(want) {
		t.Fatalf("Outcomes() = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Outcomes() = %v, want %v", got, want)
		}
	}
}
