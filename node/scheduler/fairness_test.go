package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// serialRig is a rig with one tiny cell, so the dispatch order is the
// start order, and limits roomy enough that admission never refuses.
func serialRig(t *testing.T, opts scheduler.Options) *rig {
	return newRig(t, func(p *policy.NodeAdmissionPolicy) {
		nodetest.Roomy(p, 1<<15)
		nodetest.Parallelism(p, "tiny", 1)
	}, opts)
}

// fill queues n activations of tenant at priority while the cell is held.
func (r *rig) fill(t *testing.T, log *dispatchLog, tenant string, priority uint32, n int) {
	t.Helper()
	for range n {
		r.submit(t, context.Background(), nodetest.Ask{Tenant: tenant, Priority: priority}, newJob(tenant, log))
	}
}

func (r *rig) waitLog(t *testing.T, log *dispatchLog, n int) []string {
	t.Helper()
	nodetest.Eventually(t, 60*time.Second, fmt.Sprintf("%d dispatches", n), func() bool { return log.len() >= n })
	return log.snapshot()
}

func count(names []string) map[string]int {
	c := map[string]int{}
	for _, n := range names {
		c[n]++
	}
	return c
}

// TestFairnessUnderFlood: acme floods (9,000 queued before globex's
// 6,000); with equal weights, over the first 10,000 activations both
// stay backlogged and each gets within 10% of the other's service.
func TestFairnessUnderFlood(t *testing.T) {
	r := serialRig(t, scheduler.Options{})
	log := &dispatchLog{}
	release := r.holdAll(t, policy.Tiny)
	r.fill(t, log, "acme", 1, 9000)
	r.fill(t, log, "globex", 1, 6000)
	release()
	got := count(r.waitLog(t, log, 10_000)[:10_000])
	a, g := got["acme"], got["globex"]
	if diff := max(a, g) - min(a, g); float64(diff) > 0.1*float64(max(a, g)) {
		t.Fatalf("acme %d, globex %d: not within 10%%", a, g)
	}
	r.waitLog(t, log, 15_000)
	r.settled(t)
}

func TestWeightsShareService(t *testing.T) {
	r := serialRig(t, scheduler.Options{Weights: map[string]uint32{"acme": 3}})
	log := &dispatchLog{}
	release := r.holdAll(t, policy.Tiny)
	r.fill(t, log, "globex", 1, 500)
	r.fill(t, log, "acme", 1, 1500)
	release()
	got := count(r.waitLog(t, log, 1000)[:1000])
	if got["acme"] != 750 || got["globex"] != 250 {
		t.Fatalf("first 1000 dispatches: %v, want 3:1", got)
	}
	r.waitLog(t, log, 2000)
	r.settled(t)
}

// TestHigherClassFirst: with fewer higher-class activations than the
// starvation bound, all of them go before any lower one.
func TestHigherClassFirst(t *testing.T) {
	r := serialRig(t, scheduler.Options{})
	log := &dispatchLog{}
	release := r.holdAll(t, policy.Tiny)
	r.fill(t, log, "acme", 1, 3) // batch
	for range 3 {
		r.submit(t, context.Background(), nodetest.Ask{Priority: 7}, newJob("interactive", log))
	}
	release()
	got := r.waitLog(t, log, 6)
	want := []string{"interactive", "interactive", "interactive", "acme", "acme", "acme"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	r.settled(t)
}

// TestLowerClassIsNotStarved: an interactive flood cannot hold a waiting
// batch activation back for more than the starvation bound.
func TestLowerClassIsNotStarved(t *testing.T) {
	const bound = 4
	r := serialRig(t, scheduler.Options{StarvationBound: bound})
	log := &dispatchLog{}
	release := r.holdAll(t, policy.Tiny)
	for range 40 {
		r.submit(t, context.Background(), nodetest.Ask{Priority: 7}, newJob("interactive", log))
	}
	for range 5 {
		r.submit(t, context.Background(), nodetest.Ask{Priority: 1}, newJob("batch", log))
	}
	release()
	got := r.waitLog(t, log, 45)
	run, batches := 0, 0
	for _, name := range got {
		if name == "batch" {
			batches++
			run = 0
			continue
		}
		if batches < 5 {
			run++
			if run > bound {
				t.Fatalf("batch waited through %d interactive dispatches (bound %d): %v", run, bound, got)
			}
		}
	}
	r.settled(t)
}
