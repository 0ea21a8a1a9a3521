package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// TestTerminalOutcomes drives every outcome the backend can produce
// through admission, scheduler, pool and runner, and checks the cell's
// disposition and that every node, tenant, trust, queue and cell counter
// is back to exactly what it was.
func TestTerminalOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		behavior synthetic.Behavior
		ask      nodetest.Ask
		want     runner.Outcome
		wantErr  error
		cell     runner.Disposition
	}{
		{"success", synthetic.Behavior{Output: []byte("ok")}, nodetest.Ask{}, runner.Succeeded, nil, runner.Released},
		{"declared error", synthetic.Behavior{Exit: runner.ExitDeclaredError}, nodetest.Ask{}, runner.DeclaredError, runner.ErrDeclared, runner.Released},
		{"trap", synthetic.Behavior{Exit: runner.ExitTrapped}, nodetest.Ask{}, runner.Trapped, runner.ErrTrapped, runner.Released},
		{"deadline interruption", synthetic.Behavior{Block: true}, nodetest.Ask{WallTime: 60 * time.Millisecond},
			runner.DeadlineExceeded, runner.ErrDeadlineExceeded, runner.Released},
		{"fuel interruption", synthetic.Behavior{Fuel: 2_000_000}, nodetest.Ask{Fuel: 1_000_000},
			runner.FuelExhausted, runner.ErrFuelExhausted, runner.Released},
		{"memory exhaustion", synthetic.Behavior{Memory: 2 << 20}, nodetest.Ask{Memory: 1 << 20},
			runner.MemoryExhausted, runner.ErrMemoryExhausted, runner.Released},
		{"platform failure", synthetic.Behavior{Exit: runner.ExitPlatformFailure}, nodetest.Ask{},
			runner.PlatformFailure, runner.ErrPlatformFailure, runner.Released},
		{"uncertain cleanup", synthetic.Behavior{UncertainCleanup: true}, nodetest.Ask{}, runner.Succeeded, nil, runner.Quarantined},
		{"backend panic", synthetic.Behavior{Panic: true}, nodetest.Ask{}, runner.PlatformFailure, runner.ErrPlatformFailure, runner.Quarantined},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil, func(*runner.Guest) synthetic.Behavior { return tt.behavior })
			permit := r.node.Admit(t, tt.ask)
			a, err := r.pipe.Submit(context.Background(), permit, []byte("in"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := a.Wait(context.Background())
			if rep.Outcome != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("outcome %v, %v; want %v, %v", rep.Outcome, err, tt.want, tt.wantErr)
			}
			if rep.Disposition != tt.cell {
				t.Fatalf("cell %v, want %v", rep.Disposition, tt.cell)
			}
			// The caller is told only after the reservation and the cell are
			// back; the scheduler's own bookkeeping of the goroutine ends a
			// moment later.
			got := r.pipe.Counters()
			got.Executing = 0
			if len(got.Residue()) != 0 {
				t.Fatalf("residue after the outcome was reported: %v", got.Residue())
			}
			if tt.cell == runner.Released {
				r.settled(t)
				return
			}
			if !ledgerOnly(got).Equal(ledgerOnly(r.base)) {
				t.Fatalf("ledger did not come back:\n%s", strings.Join(got.Diff(r.base), "\n"))
			}
			tiny := got.Cells[policy.Tiny]
			if tiny.Quarantined != 1 || tiny.Usable != r.base.Cells[policy.Tiny].Usable-1 {
				t.Fatalf("tiny cells %+v, want one quarantined", tiny)
			}
			if _, err := r.pipe.Pool().Replenish(policy.Tiny); err != nil {
				t.Fatal(err)
			}
			r.settled(t)
		})
	}
}

// TestQuarantinedCellNeverRunsAgain runs many activations on a class of
// two cells, one of which is quarantined early: every later activation
// runs on the survivor, and the synthetic backend sees no reuse of the
// bad cell.
func TestQuarantinedCellNeverRunsAgain(t *testing.T) {
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) { nodetest.Parallelism(p, "tiny", 2) },
		synthetic.ByInput(map[string]synthetic.Behavior{"bad": {UncertainCleanup: true}}))
	first := r.node.Admit(t, nodetest.Ask{})
	a, err := r.pipe.Submit(context.Background(), first, []byte("bad"))
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := a.Wait(context.Background())
	for range 20 {
		a, err := r.pipe.Submit(context.Background(), r.node.Admit(t, nodetest.Ask{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := a.Wait(context.Background())
		if err != nil || rep.Cell == bad.Cell {
			t.Fatalf("report %+v, %v (bad cell %+v)", rep, err, bad.Cell)
		}
	}
	if r.backend.Violations() != 0 {
		t.Fatal("the quarantined cell was reused")
	}
}

// slowStop is a backend whose guest, once interrupted, takes until stop
// is closed to actually stop.
type slowStop struct {
	started, interrupted, stop chan struct{}
}

func newSlowStop() *slowStop {
	return &slowStop{started: make(chan struct{}), interrupted: make(chan struct{}), stop: make(chan struct{})}
}

func (b *slowStop) Run(ctx context.Context, _ *runner.Guest) runner.Exit {
	close(b.started)
	<-ctx.Done()
	close(b.interrupted)
	<-b.stop
	return runner.Exit{Kind: runner.ExitInterrupted}
}

// TestCancelledCallerDoesNotReleaseEarly is the design note's rule: a
// caller that abandons its call while the activation runs gets its
// answer at once, but the reservation stays with the execution goroutine
// until the guest has stopped and the cell is back.
func TestCancelledCallerDoesNotReleaseEarly(t *testing.T) {
	n := nodetest.New(t, nil)
	b := newSlowStop()
	p, err := newPipeline(n, b)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := p.Counters()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		_, err := p.Invoke(ctx, n.Controller, nodetest.Request(nodetest.Ask{}), nil)
		returned <- err
	}()
	<-b.started
	running := p.Counters()
	cancel()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller got %v, want context.Canceled", err)
	}
	<-b.interrupted
	if got := p.Counters(); !got.Equal(running) {
		t.Fatalf("the reservation moved while the guest was still stopping:\n%s", strings.Join(got.Diff(running), "\n"))
	}
	if running.Ledger.Node.Live != 1 || running.Cells[policy.Tiny].Leased != 1 {
		t.Fatalf("while running: %+v", running.Ledger.Node)
	}
	close(b.stop)
	nodetest.Eventually(t, time.Minute, "the execution to finish", func() bool { return p.Counters().Equal(base) })
	if s := p.Runner().Stats(); s.Outcomes[runner.Canceled] != 1 || s.Released != 1 {
		t.Fatalf("runner stats %+v", s)
	}
}

// TestDroppedCallerLeavesExecutionRunning: the caller stops waiting
// without cancelling the activation, which runs to success; nothing is
// released before it does.
func TestDroppedCallerLeavesExecutionRunning(t *testing.T) {
	hold := make(chan struct{})
	started := make(chan struct{})
	r := newRig(t, nil, func(*runner.Guest) synthetic.Behavior {
		return synthetic.Behavior{Hold: hold, Started: func() { close(started) }}
	})
	a, err := r.pipe.Submit(context.Background(), r.node.Admit(t, nodetest.Ask{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	waitCtx, stopWaiting := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer stopWaiting()
	if _, err := a.Wait(waitCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if c := r.pipe.Counters(); c.Ledger.Node.Live != 1 || c.Executing != 1 {
		t.Fatalf("reservation gone while the guest runs: %+v", c.Ledger.Node)
	}
	close(hold)
	<-a.Done()
	rep, err := a.Wait(context.Background())
	if err != nil || rep.Outcome != runner.Succeeded {
		t.Fatalf("report %+v, %v", rep, err)
	}
	r.settled(t)
}

// TestQueuedPathsThroughThePipeline: overflow, queued cancellation and
// expiry, each with its permit released and the counters back.
func TestQueuedPathsThroughThePipeline(t *testing.T) {
	hold := make(chan struct{})
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) {
		nodetest.Parallelism(p, "tiny", 1)
		nodetest.ShortGrants(p)
	}, func(*runner.Guest) synthetic.Behavior { return synthetic.Behavior{Hold: hold} })
	busy, err := r.pipe.Submit(context.Background(), r.node.Admit(t, nodetest.Ask{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, time.Minute, "the cell to be busy", func() bool { return r.pipe.Counters().Executing == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	canceled, err := r.pipe.Submit(ctx, r.node.Admit(t, nodetest.Ask{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := r.pipe.Submit(context.Background(), r.node.Admit(t, nodetest.Ask{WallTime: 20 * time.Millisecond}), nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := canceled.Wait(context.Background()); !errors.Is(err, scheduler.ErrCanceled) {
		t.Fatalf("canceled: %v", err)
	}
	if _, err := expiring.Wait(context.Background()); !errors.Is(err, scheduler.ErrExpired) {
		t.Fatalf("expiring: %v", err)
	}
	// Interactive holds 3 in admission; the scheduler sees the same bound,
	// so a fourth is refused by admission before it reaches the queue.
	var waiting []*runner.Activation
	for range 3 {
		a, err := r.pipe.Submit(context.Background(), r.node.Admit(t, nodetest.Ask{Priority: 7}), nil)
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, a)
	}
	_, err = r.pipe.Invoke(context.Background(), r.node.Controller, nodetest.Request(nodetest.Ask{Priority: 7}), nil)
	var e core.Error
	if !errors.As(err, &e) || e.Scope() != core.ScopeQueueClass {
		t.Fatalf("overflow: %v", err)
	}
	close(hold)
	for _, a := range append(waiting, busy) {
		if _, err := a.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r.settled(t)
}
