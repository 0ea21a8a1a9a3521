package scheduler_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

func TestSubmitRefusalsReleaseThePermit(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, r *rig) (context.Context, *core.AdmissionPermit)
		want  error
	}{
		{"a permit that is not live is refused", func(t *testing.T, r *rig) (context.Context, *core.AdmissionPermit) {
			p := r.node.Admit(t, nodetest.Ask{})
			p.Release()
			return context.Background(), p
		}, core.ErrPermitNotLive},
		{"a canceled context is refused", func(t *testing.T, r *rig) (context.Context, *core.AdmissionPermit) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, r.node.Admit(t, nodetest.Ask{})
		}, scheduler.ErrCanceled},
		{"an expired permit is refused", func(t *testing.T, r *rig) (context.Context, *core.AdmissionPermit) {
			p := r.node.Admit(t, nodetest.Ask{WallTime: time.Millisecond})
			time.Sleep(2 * time.Millisecond)
			return context.Background(), p
		}, scheduler.ErrExpired},
		{"a closed scheduler refuses", func(t *testing.T, r *rig) (context.Context, *core.AdmissionPermit) {
			r.sched.Close()
			return context.Background(), r.node.Admit(t, nodetest.Ask{})
		}, scheduler.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nodetest.ShortGrants, scheduler.Options{})
			ctx, p := tt.setup(t, r)
			j := newJob("refused", nil)
			if err := r.sched.Submit(ctx, p, j); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if p.Live() {
				t.Fatal("a refused permit is still live")
			}
			r.settled(t)
		})
	}
}

func TestSubmitRefusesWhatCouldNeverRun(t *testing.T) {
	t.Run("a cell class the pool does not hold", func(t *testing.T) {
		n := nodetest.New(t, nil)
		pool, err := cellpool.New(cellpool.Config{}) // no cells at all
		if err != nil {
			t.Fatal(err)
		}
		s, err := scheduler.New(n.Provider.Policy(), pool, scheduler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		p := n.Admit(t, nodetest.Ask{})
		if err := s.Submit(context.Background(), p, newJob("x", nil)); !errors.Is(err, scheduler.ErrCellClassNotPooled) {
			t.Fatalf("got %v", err)
		}
		if p.Live() {
			t.Fatal("permit still live")
		}
	})
	t.Run("a priority beyond this policy's maximum", func(t *testing.T) {
		r := newRig(t, nil, scheduler.Options{})
		other := nodetest.New(t, func(p *policy.NodeAdmissionPolicy) {
			p.Node.MaximumPriority = 12
			p.QueueClasses[1].MaxPriority = 12
			for i := range p.Tenants {
				p.Tenants[i].MaximumPriority = 12
			}
		})
		p := other.Admit(t, nodetest.Ask{Priority: 11})
		if err := r.sched.Submit(context.Background(), p, newJob("x", nil)); !errors.Is(err, scheduler.ErrUnknownQueueClass) {
			t.Fatalf("got %v", err)
		}
		if p.Live() {
			t.Fatal("permit still live")
		}
	})
	t.Run("a queue class of another policy", func(t *testing.T) {
		r := newRig(t, nil, scheduler.Options{})
		other := nodetest.New(t, func(p *policy.NodeAdmissionPolicy) { p.QueueClasses[0].Name = "bulk" })
		p := other.Admit(t, nodetest.Ask{})
		if err := r.sched.Submit(context.Background(), p, newJob("x", nil)); !errors.Is(err, scheduler.ErrUnknownQueueClass) {
			t.Fatalf("got %v", err)
		}
		if p.Live() {
			t.Fatal("permit still live")
		}
	})
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	n := nodetest.New(t, nil)
	pool, _ := cellpool.New(cellpool.ConfigFromPolicy(n.Provider.Policy()))
	for name, opts := range map[string]scheduler.Options{
		"zero weight":               {Weights: map[string]uint32{"acme": 0}},
		"negative queue bound":      {QueueBounds: map[string]int{"batch": -1}},
		"negative starvation bound": {StarvationBound: -1},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := scheduler.New(n.Provider.Policy(), pool, opts); !errors.Is(err, scheduler.ErrInvalidOptions) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// TestQueueOverflow fills the cells and the queue for real, then checks
// that the next activation is refused and its reservation returned.
func TestQueueOverflow(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{QueueBounds: map[string]int{"batch": 2}})
	release := r.holdAll(t, policy.Tiny)
	a, b := newJob("a", nil), newJob("b", nil)
	r.submit(t, context.Background(), nodetest.Ask{}, a)
	r.submit(t, context.Background(), nodetest.Ask{}, b)
	before := r.node.Provider.Usage()
	p := r.node.Admit(t, nodetest.Ask{})
	if err := r.sched.Submit(context.Background(), p, newJob("c", nil)); !errors.Is(err, scheduler.ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	if p.Live() {
		t.Fatal("overflowing permit still live")
	}
	if got := r.node.Provider.Usage(); got.Node != before.Node {
		t.Fatalf("overflow left a reservation: %+v vs %+v", got.Node, before.Node)
	}
	release()
	a.waitStarted(t)
	b.waitStarted(t)
	r.settled(t)
}

// TestAdmissionBoundsTheQueueFirst shows that with the scheduler's bound
// equal to the policy's, admission is what refuses the overflow.
func TestAdmissionBoundsTheQueueFirst(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	release := r.holdAll(t, policy.Tiny)
	var jobs []*job
	for range 3 { // interactive holds 3
		j := newJob("i", nil)
		r.submit(t, context.Background(), nodetest.Ask{Priority: 7}, j)
		jobs = append(jobs, j)
	}
	_, err := r.node.Controller.Admit(nodetest.Request(nodetest.Ask{Priority: 7}))
	var e core.Error
	if !errors.As(err, &e) || e.Scope() != core.ScopeQueueClass || e.Reason() != core.ReasonCapacityExhausted {
		t.Fatalf("got %v, want queue-class capacity-exhausted", err)
	}
	release()
	for _, j := range jobs {
		j.waitStarted(t)
	}
	r.settled(t)
}

func TestQueuedCancellationDropsAndReleases(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	release := r.holdAll(t, policy.Tiny)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	j := newJob("canceled", nil)
	p := r.submit(t, ctx, nodetest.Ask{}, j)
	keep := newJob("kept", nil)
	r.submit(t, context.Background(), nodetest.Ask{}, keep)
	cancel()
	if err := j.waitAbandoned(t); !errors.Is(err, scheduler.ErrCanceled) {
		t.Fatalf("got %v, want ErrCanceled", err)
	}
	if p.Live() {
		t.Fatal("dropped permit still live")
	}
	if got := r.sched.Queued("batch"); got != 1 {
		t.Fatalf("queued %d, want the other activation only", got)
	}
	release()
	keep.waitStarted(t)
	r.settled(t)
	if s := r.sched.Stats(); s.Canceled != 1 || s.Started != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestExpiryInTheQueue(t *testing.T) {
	r := newRig(t, nodetest.ShortGrants, scheduler.Options{})
	release := r.holdAll(t, policy.Tiny)
	defer release()
	j := newJob("expires", nil)
	p := r.submit(t, context.Background(), nodetest.Ask{WallTime: 20 * time.Millisecond}, j)
	// Nothing frees a cell: the permit's own deadline must drop it.
	if err := j.waitAbandoned(t); !errors.Is(err, scheduler.ErrExpired) {
		t.Fatalf("got %v, want ErrExpired", err)
	}
	if p.Live() {
		t.Fatal("expired permit still live")
	}
	release()
	r.settled(t)
	if s := r.sched.Stats(); s.Expired != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDeadlineIsCheckedBeforeAllocation moves the scheduler's clock past
// the deadline while the activation waits; when a cell frees up, the
// activation is dropped without the cell ever being leased to it.
func TestDeadlineIsCheckedBeforeAllocation(t *testing.T) {
	clock := &nodetest.ShiftClock{}
	r := newRig(t, nil, scheduler.Options{Clock: clock})
	release := r.holdAll(t, policy.Tiny)
	j := newJob("late", nil)
	r.submit(t, context.Background(), nodetest.Ask{}, j)
	clock.Shift(time.Hour)
	release()
	if err := j.waitAbandoned(t); !errors.Is(err, scheduler.ErrExpired) {
		t.Fatalf("got %v, want ErrExpired", err)
	}
	r.settled(t)
	if s := r.sched.Stats(); s.Started != 0 || s.Expired != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestFailedStartReleasesTheLease makes StartExecution (on the admission
// controller's clock) see the deadline passed after the scheduler's own
// check succeeded: the permit is released by core and the scheduler must
// give the cell back.
func TestFailedStartReleasesTheLease(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	clock := &nodetest.ShiftClock{}
	ctl := r.node.Provider.Controller(core.ControllerConfig{Source: r.node.Source, Load: r.node.Load, Clock: clock})
	release := r.holdAll(t, policy.Tiny)
	p, err := ctl.Admit(nodetest.Request(nodetest.Ask{}))
	if err != nil {
		t.Fatal(err)
	}
	j := newJob("start-fails", nil)
	if err := r.sched.Submit(context.Background(), p, j); err != nil {
		t.Fatal(err)
	}
	clock.Shift(time.Hour)
	release()
	if err := j.waitAbandoned(t); !errors.Is(err, scheduler.ErrExpired) {
		t.Fatalf("got %v, want ErrExpired", err)
	}
	r.settled(t)
	if s := r.sched.Stats(); s.Started != 0 || s.Expired != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRunningActivationKeepsItsReservation cancels the activation's
// context while it runs: the reservation (live slot, fuel, memory, cell
// backlog) stays with the running goroutine until it returns.
func TestRunningActivationKeepsItsReservation(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	proceed := make(chan struct{})
	sawCancel := make(chan struct{})
	j := newJob("running", nil)
	j.run = func(ctx context.Context, grant *core.Grant, lease *cellpool.Lease) {
		<-ctx.Done()
		close(sawCancel)
		<-proceed // the guest takes a while to stop
		lease.Release()
	}
	r.submit(t, ctx, nodetest.Ask{}, j)
	j.waitStarted(t)
	running := r.node.Provider.Usage()
	if running.Node.Live != 1 || running.Node.Queued != 0 {
		t.Fatalf("while running: %+v, want live 1 queued 0", running.Node)
	}
	cancel()
	<-sawCancel
	if got := r.node.Provider.Usage(); !reflect.DeepEqual(got, running) {
		t.Fatalf("cancellation released the reservation early: %+v", got.Node)
	}
	close(proceed)
	<-j.ended
	r.settled(t)
}

// TestTheSchedulerReleasesTheExecutionPermitOnceBeforeEnd: the job never
// releases its permit; when Run returns, the scheduler does, once, and
// only then calls End(nil), so the reservation is back when the caller
// hears.
func TestTheSchedulerReleasesTheExecutionPermitOnceBeforeEnd(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	j := newJob("owner", nil)
	// The job gets the grant, never the execution permit: only the
	// scheduler can release it.
	j.run = func(_ context.Context, _ *core.Grant, lease *cellpool.Lease) {
		lease.Release()
	}
	ended := make(chan string, 1)
	j.onEnd = func(err error) {
		switch {
		case err != nil:
			ended <- "End(" + err.Error() + ")"
		case r.node.Provider.LiveReservations() != 0:
			ended <- "End(nil) while the execution permit is live"
		case len(r.node.Provider.Usage().Held()) != 0 || r.node.Provider.LiveReservations() != 0:
			ended <- "End(nil) before the reservation came back"
		default:
			ended <- ""
		}
	}
	r.submit(t, context.Background(), nodetest.Ask{}, j)
	if problem := <-ended; problem != "" {
		t.Fatal(problem)
	}
	r.settled(t)
	if s := r.sched.Stats(); s.Orphaned != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestLeaseLeftHeldIsQuarantined covers a job that returns without ending
// its lease or releasing its permit: the cell's state is unknown, so it
// is quarantined, and the reservation is still returned.
func TestLeaseLeftHeldIsQuarantined(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	j := newJob("careless", nil)
	j.run = func(context.Context, *core.Grant, *cellpool.Lease) {}
	r.submit(t, context.Background(), nodetest.Ask{}, j)
	<-j.ended
	nodetest.Eventually(t, time.Minute, "the backstop", func() bool { return r.sched.Executing() == 0 })
	if got := r.node.Provider.Usage(); got.Node != r.base.ledger.Node || r.node.Provider.LiveReservations() != 0 {
		t.Fatalf("reservation not returned: %+v", got.Node)
	}
	if s := r.pool.Stats(policy.Tiny); s.Quarantined != 1 || s.Leased != 0 {
		t.Fatalf("pool %+v, want one quarantined cell", s)
	}
	if s := r.sched.Stats(); s.Orphaned != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCloseDropsQueuedAndWaitsForRunning(t *testing.T) {
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) { nodetest.Parallelism(p, "tiny", 1) }, scheduler.Options{})
	proceed := make(chan struct{})
	running := newJob("running", nil)
	running.run = func(_ context.Context, _ *core.Grant, lease *cellpool.Lease) {
		<-proceed
		lease.Release()
	}
	r.submit(t, context.Background(), nodetest.Ask{}, running)
	running.waitStarted(t)
	queued := newJob("queued", nil)
	r.submit(t, context.Background(), nodetest.Ask{}, queued)
	closed := make(chan struct{})
	go func() {
		r.sched.Close()
		close(closed)
	}()
	if err := queued.waitAbandoned(t); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while an activation was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(proceed)
	<-closed
	r.settled(t)
}

func TestDrainRunsEverythingQueued(t *testing.T) {
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) {
		nodetest.Parallelism(p, "tiny", 1)
		nodetest.Roomy(p, 1024) // probes that beat Drain's start queue up too
	}, scheduler.Options{})
	release := r.holdAll(t, policy.Tiny)
	var jobs []*job
	for range 5 {
		j := newJob("j", nil)
		r.submit(t, context.Background(), nodetest.Ask{}, j)
		jobs = append(jobs, j)
	}
	drained := make(chan struct{})
	go func() {
		r.sched.Drain()
		close(drained)
	}()
	nodetest.Eventually(t, time.Minute, "drain to stop accepting", func() bool {
		p := r.node.Admit(t, nodetest.Ask{})
		return errors.Is(r.sched.Submit(context.Background(), p, newJob("late", nil)), scheduler.ErrClosed)
	})
	release()
	<-drained
	for _, j := range jobs {
		select {
		case <-j.ended:
		default:
			t.Fatal("Drain returned before a queued activation ran")
		}
	}
	r.settled(t)
}

// TestConcurrentSubmitAndCancel races submissions, cancellations and
// completions; afterwards every counter is back and every activation was
// accounted for exactly once.
func TestConcurrentSubmitAndCancel(t *testing.T) {
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) {
		nodetest.Roomy(p, 4096)
		nodetest.Parallelism(p, "tiny", 3)
	}, scheduler.Options{})
	const workers, each = 8, 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, dropped := 0, 0
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ctx, cancel := context.WithCancel(context.Background())
				j := newJob("c", nil)
				p := r.node.Admit(t, nodetest.Ask{Priority: uint32((w + i) % 8)})
				if err := r.sched.Submit(ctx, p, j); err != nil {
					t.Errorf("submit: %v", err)
					cancel()
					continue
				}
				if i%3 == 0 {
					cancel()
				}
				select {
				case <-j.ended:
					mu.Lock()
					ran++
					mu.Unlock()
				case <-j.abandoned:
					mu.Lock()
					dropped++
					mu.Unlock()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	r.settled(t)
	s := r.sched.Stats()
	if ran+dropped != workers*each || int64(ran) != s.Started || int64(dropped) != s.Canceled+s.Expired {
		t.Fatalf("ran %d dropped %d, stats %+v", ran, dropped, s)
	}
}

// TestTheJobGetsThePermitsGrant: Job.Run is handed the grant the
// scheduler took at Submit, field for field the permit's own.
func TestTheJobGetsThePermitsGrant(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	j := newJob("granted", nil)
	got := make(chan core.Grant, 1)
	j.run = func(_ context.Context, g *core.Grant, lease *cellpool.Lease) {
		got <- *g
		lease.Release()
	}
	p := r.node.Admit(t, nodetest.Ask{Fuel: 777, Memory: 4096, WallTime: 3 * time.Second})
	want := p.Grant()
	if err := r.sched.Submit(context.Background(), p, j); err != nil {
		t.Fatal(err)
	}
	if g := <-got; !reflect.DeepEqual(g, want) {
		t.Fatalf("the job got\n %+v\nwant the permit's\n %+v", g, want)
	}
	<-j.ended
	r.settled(t)
}
