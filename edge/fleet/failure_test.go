package fleet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestDeadNodeSliceReturns: a node whose client closes without revoking
// its lease (as a killed process's would) keeps its slice in etcd only
// until the lease expires; then the other two hold the whole limit and
// admit up to it.
func TestDeadNodeSliceReturns(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 12
	admin := e.client(t)
	setLimit(t, admin, "acme", fmt.Sprint(limit))
	rec := &recorder{}
	a := startNode(t, e, "node-a", rec, []string{"acme"}, nil, nil)
	b := startNode(t, e, "node-b", rec, []string{"acme"}, nil, nil)
	c := startNode(t, e, "node-c", rec, []string{"acme"}, nil, nil)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	hold := randomHold(20*time.Millisecond, 60*time.Millisecond)
	workers(ctx, &wg, a.sink, "acme", 10, hold)
	workers(ctx, &wg, b.sink, "acme", 10, hold)
	cctx, ccancel := context.WithCancel(context.Background())
	var cwg sync.WaitGroup
	workers(cctx, &cwg, c.sink, "acme", 10, hold)
	waitFor(t, "node-c to hold a slice", func() bool { return slicesInEtcd(t, admin, "acme")["node-c"] >= 3 })

	// node-c dies: its clients stop with it and its client closes; the
	// broker keeps failing against a closed client until the test ends.
	ccancel()
	cwg.Wait()
	c.client.Close()
	returned := waitFor(t, "node-c's slice to leave etcd", func() bool {
		_, held := slicesInEtcd(t, admin, "acme")["node-c"]
		return !held
	})
	if bound := testTTL + testRefresh; returned > patience {
		t.Fatalf("node-c's slice returned after %v (TTL plus a refresh is %v)", returned, bound)
	}
	full := waitFor(t, "node-a and node-b to hold the whole limit", func() bool {
		s := slicesInEtcd(t, admin, "acme")
		return s["node-a"]+s["node-b"] == limit
	})
	// And they admit up to it: the fleet's live count reaches the limit
	// after node-c died.
	waitFor(t, "node-a and node-b to admit the whole limit", func() bool {
		return a.sink.Live("acme")+b.sink.Live("acme") == limit
	})
	t.Logf("node-c's slice left etcd %v after its client closed (TTL %v, refresh %v); the others held the whole limit %v later",
		returned.Round(time.Millisecond), testTTL, testRefresh, full.Round(time.Millisecond))
	cancel()
	wg.Wait()
	if peak, _ := rec.fleetLive("acme"); peak > limit {
		t.Fatalf("the fleet's live count reached %d, over the limit %d", peak, limit)
	}
	c.stop()
	a.stop()
	b.stop()
	checkHistory(t, admin, "acme", limit)
}

// TestPartitionFailsClosed: etcd stopped (SIGSTOP) for twice the TTL. The
// fleet-limited tenant is refused as unavailable from its local deadline
// on, and nothing of it is admitted after the latest deadline a
// keep-alive sent before the stop could have set; a tenant that is not
// fleet-limited keeps being admitted. After SIGCONT the nodes admit the
// fleet tenant again without a restart.
func TestPartitionFailsClosed(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 8
	admin := e.client(t)
	setLimit(t, admin, "acme", fmt.Sprint(limit))
	rec := &recorder{}
	local := map[string]int64{"solo": 4}
	a := startNode(t, e, "node-a", rec, []string{"acme"}, local, nil)
	b := startNode(t, e, "node-b", rec, []string{"acme"}, local, nil)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	hold := randomHold(10*time.Millisecond, 50*time.Millisecond)
	for _, n := range []*testNode{a, b} {
		workers(ctx, &wg, n.sink, "acme", 6, hold)
		workers(ctx, &wg, n.sink, "solo", 2, hold)
	}
	waitFor(t, "both nodes to hold slices", func() bool {
		s := slicesInEtcd(t, admin, "acme")
		return s["node-a"] > 0 && s["node-b"] > 0
	})

	e.pause(t)
	stopped := time.Now()
	var failClosed time.Duration
	for _, n := range []*testNode{a, b} {
		d := waitFor(t, n.id+" to refuse acme as unavailable", func() bool {
			n.sink.mu.Lock()
			defer n.sink.mu.Unlock()
			return !n.sink.lastExpired.IsZero() && n.sink.lastExpired.After(stopped)
		})
		failClosed = max(failClosed, d)
	}
	// Hold the stop for twice the TTL.
	time.Sleep(time.Until(stopped.Add(2 * testTTL)))
	soloDuring := countAdmissions(rec, "solo", stopped, time.Now())
	resumed := time.Now() // before SIGCONT: nothing etcd answers after it counts as during the stop
	e.resume(t)

	// Nothing of acme was admitted past the latest local deadline a
	// keep-alive sent before the stop can give.
	latest := stopped.Add(testTTL - testMaxGrant - testSlack)
	if late := countAdmissions(rec, "acme", latest, resumed); late > 0 {
		t.Fatalf("%d admissions of the fleet tenant between the latest possible deadline and the resume", late)
	}
	if soloDuring == 0 {
		t.Fatal("the tenant that is not fleet-limited was not admitted while etcd was stopped")
	}
	recovered := waitFor(t, "both nodes to admit acme again", func() bool {
		return countAdmissions(rec, "acme", resumed, time.Now().Add(time.Hour)) > 0 &&
			a.sink.slice("acme").slice > 0 && b.sink.slice("acme").slice > 0
	})
	t.Logf("fail closed %v after the stop (TTL %v, margin %v, keep-alive every %v); %d admissions of the local tenant during the stop; admitting again %v after the resume",
		failClosed.Round(time.Millisecond), testTTL, testMaxGrant+testSlack, testKeepAlive, soloDuring, recovered.Round(time.Millisecond))
	cancel()
	wg.Wait()
	if peak, _ := rec.fleetLive("acme"); peak > limit {
		t.Fatalf("the fleet's live count reached %d, over the limit %d", peak, limit)
	}
	a.stop()
	b.stop()
	checkHistory(t, admin, "acme", limit)
}

func countAdmissions(rec *recorder, tenant string, from, to time.Time) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, e := range rec.events {
		if e.tenant == tenant && e.delta > 0 && !e.at.Before(from) && e.at.Before(to) {
			n++
		}
	}
	return n
}

// TestSkewUtilization: 80% of the tenant's clients at one node. In steady
// state the fleet admits at least 90% of the limit.
func TestSkewUtilization(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 40
	admin := e.client(t)
	setLimit(t, admin, "acme", fmt.Sprint(limit))
	rec := &recorder{}
	nodes := []*testNode{
		startNode(t, e, "node-a", rec, []string{"acme"}, nil, nil),
		startNode(t, e, "node-b", rec, []string{"acme"}, nil, nil),
		startNode(t, e, "node-c", rec, []string{"acme"}, nil, nil),
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	hold := randomHold(20*time.Millisecond, 80*time.Millisecond)
	for i, clients := range []int{64, 8, 8} { // twice the limit, 80% at node-a
		workers(ctx, &wg, nodes[i].sink, "acme", clients, hold)
	}
	settled := waitFor(t, "the slices to settle near the limit", func() bool {
		var sum int64
		for _, n := range nodes {
			sum += n.sink.slice("acme").slice
		}
		return sum >= limit*9/10
	})
	// Steady state: sample the fleet's live count for five seconds.
	var samples, total int64
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, n := range nodes {
			total += n.sink.Live("acme")
		}
		samples++
	}
	utilization := float64(total) / float64(samples) / limit
	var sl []int64
	for _, n := range nodes {
		sl = append(sl, n.sink.slice("acme").slice)
	}
	t.Logf("skew 80/10/10, limit %d: settled in %v; mean fleet live %.1f%% of the limit over %d samples; slices %v",
		limit, settled.Round(time.Millisecond), 100*utilization, samples, sl)
	if utilization < 0.9 {
		t.Fatalf("the fleet admitted %.1f%% of the limit under skew, want at least 90%%", 100*utilization)
	}
	cancel()
	wg.Wait()
	if peak, _ := rec.fleetLive("acme"); peak > limit {
		t.Fatalf("the fleet's live count reached %d, over the limit %d", peak, limit)
	}
}

// TestEtcdRestart: etcd killed and started again on its data: the nodes
// log the failure and the recovery a bounded number of times, keep their
// leases (etcd persists them) or get new ones, and admit again; the
// slices never sum over the limit across the restart.
func TestEtcdRestart(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 8
	admin := e.client(t)
	setLimit(t, admin, "acme", fmt.Sprint(limit))
	rec := &recorder{}
	logs := []*syncBuffer{{}, {}}
	a := startNode(t, e, "node-a", rec, []string{"acme"}, nil, logs[0])
	b := startNode(t, e, "node-b", rec, []string{"acme"}, nil, logs[1])
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	for _, n := range []*testNode{a, b} {
		workers(ctx, &wg, n.sink, "acme", 6, randomHold(10*time.Millisecond, 50*time.Millisecond))
	}
	waitFor(t, "both nodes to hold slices", func() bool {
		s := slicesInEtcd(t, admin, "acme")
		return s["node-a"] > 0 && s["node-b"] > 0
	})
	killed := time.Now()
	// Killed, and started again only once both nodes have seen a request
	// fail: on a quick restart the client's own retries can hide it.
	e.proc.Stop()
	waitFor(t, "both nodes to log a failed request while etcd is down", func() bool {
		return countLines(logs[0], "fleet: etcd request failed") > 0 && countLines(logs[1], "fleet: etcd request failed") > 0
	})
	if err := e.proc.Restart(patience); err != nil {
		t.Fatalf("etcd did not restart: %v", err)
	}
	// A deadline later than the kill plus TTL less the margin comes
	// from a keep-alive sent after the kill: the node's lease was renewed
	// by the restarted etcd (or replaced).
	renewed := killed.Add(testTTL - testMaxGrant - testSlack)
	waitFor(t, "both nodes to renew and admit again after the restart", func() bool {
		return countAdmissions(rec, "acme", time.Now().Add(-200*time.Millisecond), time.Now()) > 0 &&
			a.sink.slice("acme").slice > 0 && b.sink.slice("acme").slice > 0 &&
			a.sink.slice("acme").until.After(renewed) && b.sink.slice("acme").until.After(renewed)
	})
	recovered := time.Since(killed)
	cancel()
	wg.Wait()
	a.stop()
	b.stop()
	for i, l := range logs {
		failed, back := countLines(l, "fleet: etcd request failed"), countLines(l, "fleet: etcd answers again")
		if back < 1 || failed < 1 || failed > len(failureKinds)*back {
			t.Errorf("node %d logged %d failures and %d recoveries, want at least one of each and at most one failure per kind per episode:\n%s", i, failed, back, l.String())
		}
	}
	if peak, _ := rec.fleetLive("acme"); peak > limit {
		t.Fatalf("the fleet's live count reached %d, over the limit %d", peak, limit)
	}
	checkHistory(t, admin, "acme", limit)
	t.Logf("both nodes renewed and admitting again %v after etcd was killed and restarted", recovered.Round(time.Millisecond))
}
