package scheduler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// manualClock reads a time the test sets; it never moves by itself.
type manualClock struct{ now atomic.Int64 }

func (c *manualClock) set(t time.Time)                 { c.now.Store(t.UnixNano()) }
func (c *manualClock) Now() time.Time                  { return time.Unix(0, c.now.Load()) }
func (c *manualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// OldestWait reports, per cell class, the wait of the oldest queued
// activation, whichever tenant or queue class it is in; 0 for a class with
// nothing queued and when now precedes the arrival.
func TestOldestWaitIsTheOldestQueuedActivationPerCellClass(t *testing.T) {
	clock := &manualClock{}
	t0 := time.Now()
	clock.set(t0)
	r := newRig(t, nil, scheduler.Options{Clock: clock})
	releaseTiny := r.holdAll(t, policy.Tiny)
	releaseSmall := r.holdAll(t, policy.Small)

	if got := r.sched.OldestWait(t0); got != ([policy.NumCellClasses]time.Duration{}) {
		t.Fatalf("empty scheduler: %v, want all zero", got)
	}
	clock.set(t0.Add(10 * time.Millisecond))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "acme"}, newJob("acme-1", nil))
	clock.set(t0.Add(20 * time.Millisecond))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "globex", Priority: 1}, newJob("globex-1", nil))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "acme"}, newJob("acme-2", nil))
	clock.set(t0.Add(30 * time.Millisecond))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "globex", Memory: 32 << 20}, newJob("small", nil))

	got := r.sched.OldestWait(t0.Add(100 * time.Millisecond))
	want := [policy.NumCellClasses]time.Duration{policy.Tiny: 90 * time.Millisecond, policy.Small: 70 * time.Millisecond}
	if got != want {
		t.Fatalf("OldestWait = %v, want %v", got, want)
	}
	if got := r.sched.OldestWait(t0); got != ([policy.NumCellClasses]time.Duration{}) {
		t.Errorf("now before every arrival: %v, want all zero", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { r.sched.OldestWait(t0) }); allocs != 0 {
		t.Errorf("OldestWait allocates %v times, want 0", allocs)
	}

	releaseTiny()
	releaseSmall()
	r.settled(t)
	if got := r.sched.OldestWait(t0.Add(time.Second)); got != ([policy.NumCellClasses]time.Duration{}) {
		t.Errorf("after the queues drained: %v, want all zero", got)
	}
}
