package runner_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// started admits a, leases a cell of class and starts execution, as the
// scheduler would.
func started(t *testing.T, n *nodetest.Node, pool *cellpool.FixedCellPool, a nodetest.Ask, class policy.CellClass) (*core.ExecutionPermit, *cellpool.Lease) {
	t.Helper()
	p := n.Admit(t, a)
	lease, err := pool.Acquire(class)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := p.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	return exec, lease
}

func setup(t *testing.T) (*nodetest.Node, *cellpool.FixedCellPool, core.Usage) {
	n := nodetest.New(t, nil)
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.Provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	return n, pool, n.Provider.Usage()
}

func run(t *testing.T, r *runner.Runner, exec *core.ExecutionPermit, lease *cellpool.Lease) (runner.Report, error) {
	t.Helper()
	a := r.NewActivation([]byte("in"))
	grant := exec.Grant()
	a.Run(context.Background(), &grant, lease)
	if !exec.Live() {
		t.Fatal("Run released the execution permit, which is the scheduler's")
	}
	select {
	case <-a.Done():
		t.Fatal("the caller was told before the permit was released")
	default:
	}
	exec.Release() // as the scheduler does, then End
	a.End(nil)
	return a.Wait(context.Background())
}

func TestNewNeedsABackend(t *testing.T) {
	if _, err := runner.New(runner.Config{}); !errors.Is(err, runner.ErrNoBackend) {
		t.Fatalf("got %v", err)
	}
}

func TestAccountingStartsFromThePermit(t *testing.T) {
	n, pool, base := setup(t)
	exec, lease := started(t, n, pool, nodetest.Ask{Fuel: 777, Memory: 4096, WallTime: 3 * time.Second}, policy.Tiny)
	var seen runner.Guest
	var fuel uint64
	b := synthetic.New(func(g *runner.Guest) synthetic.Behavior {
		seen = *g
		fuel = g.Budget.CPUFuel
		return synthetic.Behavior{Fuel: 700, Memory: 4000, Output: []byte("out")}
	})
	r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": b}})
	deadline := exec.Grant().Deadline
	rep, err := run(t, r, exec, lease)
	if err != nil || rep.Outcome != runner.Succeeded || string(rep.Output) != "out" {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if fuel != 777 || !seen.Deadline.Equal(deadline) || seen.Obligations.CellClass != policy.Tiny ||
		seen.Obligations.Backend != "wasm" || string(seen.Input) != "in" || seen.Cell != rep.Cell {
		t.Fatalf("guest %+v, fuel %d", seen, fuel)
	}
	if rep.Consumed.CPUFuel != 700 || rep.Consumed.PeakMemoryBytes != 4000 || rep.Disposition != runner.Released {
		t.Fatalf("report %+v", rep)
	}
	if exec.Live() || lease.Held() {
		t.Fatal("permit or lease outlived Run")
	}
	if got := n.Provider.Usage(); !reflect.DeepEqual(got, base) {
		t.Fatalf("ledger %+v, want %+v", got, base)
	}
}

// TestObligationsAreEnforced: a permit is never run on a backend or a
// cell class other than the one admitted; the guest does not start and
// the untouched cell goes back.
// backwards is a clock that runs backwards: each reading is a second
// before the last.
type backwards struct{ t time.Time }

func (c *backwards) Now() time.Time                  { c.t = c.t.Add(-time.Second); return c.t }
func (c *backwards) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestWallTimeIsNeverNegative: a clock that went backwards between the
// run's start and end reports no wall time, not a negative one.
func TestWallTimeIsNeverNegative(t *testing.T) {
	n, pool, _ := setup(t)
	exec, lease := started(t, n, pool, nodetest.Ask{}, policy.Tiny)
	r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": synthetic.New(nil)},
		Clock: &backwards{t: time.Now().Add(time.Hour)}})
	rep, err := run(t, r, exec, lease)
	if rep.Consumed.WallTime != 0 {
		t.Fatalf("wall time %v after the clock went backwards (report %+v, %v)", rep.Consumed.WallTime, rep, err)
	}
}

func TestObligationsAreEnforced(t *testing.T) {
	tests := []struct {
		name     string
		backends string
		cell     policy.CellClass
	}{
		{"another backend", "native", policy.Tiny},
		{"another cell class", "wasm", policy.Small},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, pool, base := setup(t)
			exec, lease := started(t, n, pool, nodetest.Ask{}, tt.cell)
			b := synthetic.New(nil)
			r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{tt.backends: b}})
			rep, err := run(t, r, exec, lease)
			if !errors.Is(err, runner.ErrPlatformFailure) || rep.Disposition != runner.Released {
				t.Fatalf("report %+v, %v", rep, err)
			}
			if b.Runs() != 0 {
				t.Fatal("the guest ran")
			}
			if got := n.Provider.Usage(); !reflect.DeepEqual(got, base) {
				t.Fatalf("ledger %+v", got)
			}
			if s := pool.Stats(tt.cell); s.Free != s.Configured {
				t.Fatalf("pool %+v", s)
			}
		})
	}
}

// uncertainCell is a backend whose guest returns but which cannot vouch
// for the cell after it.
type uncertainCell struct{}

func (uncertainCell) Run(context.Context, *runner.Guest) runner.Exit {
	return runner.Exit{Kind: runner.ExitReturned, CellUncertain: true}
}

// TestUncertainCellQuarantines: the guest's answer stands, and the cell
// its backend cannot vouch for leaves usable capacity.
func TestUncertainCellQuarantines(t *testing.T) {
	n, pool, base := setup(t)
	exec, lease := started(t, n, pool, nodetest.Ask{}, policy.Tiny)
	r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": uncertainCell{}}})
	rep, err := run(t, r, exec, lease)
	if err != nil || rep.Outcome != runner.Succeeded || rep.Disposition != runner.Quarantined {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if s := pool.Stats(policy.Tiny); s.Quarantined != 1 {
		t.Fatalf("pool %+v", s)
	}
	if got := n.Provider.Usage(); !reflect.DeepEqual(got, base) {
		t.Fatalf("ledger %+v", got)
	}
	if s := r.Stats(); s.Quarantined != 1 || s.Outcomes[runner.Succeeded] != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestActivationEndsOnce(t *testing.T) {
	r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": synthetic.New(nil)}})
	a := r.NewActivation(nil)
	a.End(errors.New("dropped"))
	defer func() {
		if recover() == nil {
			t.Fatal("a second end did not panic")
		}
	}()
	a.End(errors.New("again"))
}

func TestWaitingCallerMayLeave(t *testing.T) {
	r, _ := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": synthetic.New(nil)}})
	a := r.NewActivation(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	select {
	case <-a.Done():
		t.Fatal("leaving the wait ended the activation")
	default:
	}
	a.End(errors.New("cleanup"))
	if rep, err := a.Wait(context.Background()); err == nil || rep.Outcome != runner.NotRun || rep.Disposition != runner.NoCell {
		t.Fatalf("report %+v, %v", rep, err)
	}
}
