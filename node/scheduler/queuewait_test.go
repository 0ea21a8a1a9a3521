package scheduler_test

import (
	"context"
	"testing"
	"time"

	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// QueueWaits has one histogram per configured queue class, highest
// priority first, and records each dispatched activation's wait on the
// scheduler's clock, from Submit to being taken off the queue; a dropped
// activation records nothing.
func TestQueueWaitsRecordEachDispatchedWait(t *testing.T) {
	clock := &manualClock{}
	t0 := time.Now()
	clock.set(t0)
	r := newRig(t, nil, scheduler.Options{Clock: clock})

	waits := r.sched.QueueWaits()
	if len(waits) != 2 || waits[0].QueueClass != "interactive" || waits[1].QueueClass != "batch" {
		t.Fatalf("queue classes %+v", waits)
	}
	for _, h := range waits {
		if h.Count != 0 || h.Sum != 0 || len(h.Cumulative) != len(scheduler.QueueWaitBounds()) {
			t.Fatalf("before any dispatch: %+v", h)
		}
	}

	release := r.holdAll(t, policy.Tiny)
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "acme"}, newJob("batch-100ms", nil))
	clock.set(t0.Add(40 * time.Millisecond))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "globex"}, newJob("batch-60ms", nil))
	clock.set(t0.Add(97 * time.Millisecond))
	r.submit(t, context.Background(), nodetest.Ask{Tenant: "acme", Priority: 5}, newJob("interactive-3ms", nil))
	ctx, cancel := context.WithCancel(context.Background())
	dropped := newJob("dropped", nil)
	r.submit(t, ctx, nodetest.Ask{Tenant: "globex", Priority: 5}, dropped)
	cancel()
	if err := dropped.waitAbandoned(t); err != scheduler.ErrCanceled {
		t.Fatalf("dropped: %v", err)
	}
	clock.set(t0.Add(100 * time.Millisecond))
	release()
	r.settled(t)

	waits = r.sched.QueueWaits()
	check := func(h scheduler.QueueWaitHistogram, sum time.Duration, want map[time.Duration]uint64) {
		t.Helper()
		var n uint64
		for i, b := range h.Bounds {
			for w := range want {
				if w <= b && (i == 0 || w > h.Bounds[i-1]) {
					n += want[w]
				}
			}
			if h.Cumulative[i] != n {
				t.Errorf("%s: le %v = %d, want %d", h.QueueClass, b, h.Cumulative[i], n)
			}
		}
		if h.Count != n || h.Sum != sum {
			t.Errorf("%s: count %d sum %v, want %d %v", h.QueueClass, h.Count, h.Sum, n, sum)
		}
	}
	check(waits[0], 3*time.Millisecond, map[time.Duration]uint64{3 * time.Millisecond: 1})
	check(waits[1], 160*time.Millisecond, map[time.Duration]uint64{100 * time.Millisecond: 1, 60 * time.Millisecond: 1})
}
