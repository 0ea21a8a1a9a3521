package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestNeverOver: three nodes, each with its own client, lease and broker,
// and clients admitting and releasing at every node under a fleet limit
// whose demand moves between the nodes. The fleet's live count, built
// from every admission and release on the shared clock, never exceeds
// the limit, and etcd's whole history of the tenant's slices never sums
// above it at any revision.
func TestNeverOver(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 10
	admin := e.client(t)
	setLimit(t, admin, "acme", fmt.Sprint(limit))
	rec := &recorder{}
	nodes := []*testNode{
		startNode(t, e, "node-a", rec, []string{"acme"}, nil, nil),
		startNode(t, e, "node-b", rec, []string{"acme"}, nil, nil),
		startNode(t, e, "node-c", rec, []string{"acme"}, nil, nil),
	}
	var wg sync.WaitGroup
	// Demand moves: each phase puts most clients at one node, so
	// capacity must flow back from the others and over to it.
	for phase, busy := range []int{0, 1, 2, 0} {
		ctx, cancel := context.WithCancel(context.Background())
		for i, n := range nodes {
			clients := 1
			if i == busy {
				clients = 12
			}
			workers(ctx, &wg, n.sink, "acme", clients, randomHold(5*time.Millisecond, 40*time.Millisecond))
		}
		// Each phase lasts until the busy node has held most of the limit
		// (capacity has moved to it), and at least two seconds.
		start := time.Now()
		waitFor(t, fmt.Sprintf("phase %d: node %s to hold 5 of the limit", phase, nodes[busy].id), func() bool {
			return nodes[busy].sink.slice("acme").slice >= 5 && time.Since(start) > 2*time.Second
		})
		cancel()
		wg.Wait()
	}
	peak, admissions := rec.fleetLive("acme")
	if peak > limit {
		t.Fatalf("the fleet's live count reached %d, over the limit %d", peak, limit)
	}
	if peak < limit/2 || len(admissions) < 100 {
		t.Fatalf("the fleet admitted too little to judge: peak %d, %d admissions", peak, len(admissions))
	}
	for _, n := range nodes {
		n.stop()
	}
	revisions, sumPeak := checkHistory(t, admin, "acme", limit)
	t.Logf("fleet live peak %d of %d over %d admissions; %d revisions of slices, largest sum %d", peak, limit, len(admissions), revisions, sumPeak)
	if revisions < 10 {
		t.Fatalf("only %d revisions of slices to check", revisions)
	}
}
