package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"latent.dev/admission/edge/fleet/etcdproc"
	"latent.dev/admission/edge/latentd/demo"
	"latent.dev/admission/internal/shadow"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// The end-to-end tests of the fleet: one real etcd and three latentd
// processes (this test binary running main) on loopback, acme
// fleet-limited, clients holding acme's guest on every node
// (docs/fleet.md#tests).

// fleetPatience bounds every wait for what must happen.
const fleetPatience = 2 * time.Minute

// logBuffer keeps the nodes' logs for a failing test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 4<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startTestFleet starts etcd and n nodes with acme's fleet limit at
// limit. Without etcd the test skips, unless CI is set, when it fails.
func startTestFleet(t *testing.T, nodes int, limit int64) (*fleetCluster, *logBuffer) {
	t.Helper()
	c, logs := startTestFleetWith(t, limit, etcdproc.Options{})
	for i := range nodes {
		if _, err := c.addNode(fmt.Sprintf("n%d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return c, logs
}

// startTestFleetWith starts etcd serving as o says, with acme's fleet
// limit at limit, and no node.
func startTestFleetWith(t *testing.T, limit int64, o etcdproc.Options) (*fleetCluster, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	c, err := startFleetClusterWith(t.TempDir(), os.Args[0], []string{childEnv + "=1"}, logs, o)
	if errors.Is(err, etcdproc.ErrMissing) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v, and CI is set (.ci/run installs etcd-server)", err)
		}
		t.Skipf("%v: the fleet's end-to-end tests need a real etcd", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.stop()
		fleetHTTP.CloseIdleConnections()
		if t.Failed() {
			t.Logf("the nodes' logs:\n%s\netcd's log:\n%s", logs.String(), c.etcd.Log())
		}
	})
	if err := c.setLimit(limit); err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// answers are every answer clients saw, by node and tenant.
type answers struct {
	mu  sync.Mutex
	all []taggedAnswer
}

type taggedAnswer struct {
	node, tenant string
	invokeAnswer
}

func (a *answers) add(node, tenant string, x invokeAnswer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.all = append(a.all, taggedAnswer{node, tenant, x})
}

func (a *answers) snapshot() []taggedAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]taggedAnswer(nil), a.all...)
}

// drive runs clients callers of tenant's guest on n until ctx ends,
// calling again as soon as an answer comes (after a short pause on a
// refusal).
func drive(ctx context.Context, wg *sync.WaitGroup, n *fleetNode, tenant string, clients int, out *answers) {
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				a := n.invoke(tenant)
				out.add(n.id, tenant, a)
				if a.status != 200 {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
}

// waitFor polls cond every 20ms until it holds, failing after
// fleetPatience.
func waitFor(t *testing.T, what string, cond func() bool) time.Time {
	t.Helper()
	for deadline := time.Now().Add(fleetPatience); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, fleetPatience)
		}
	}
}

// liveStep is one change of a node's live count of acme, at a wall time.
type liveStep struct {
	at    time.Time
	delta int
	node  string
}

// acmeSteps reads a node's trace and returns acme's admissions (+1) and
// releases (-1), in the node's total order, each at its time on the
// shared clock; a step never comes before the one ordered before it.
func acmeSteps(t *testing.T, n *fleetNode) []liveStep {
	t.Helper()
	// As the replay reads it: each decision whole.
	r, err := trace.Open([]string{n.trace}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	type ordered struct {
		order uint64
		t     int64
		delta int
	}
	start := r.Header().StartUnixNano
	var evs []ordered
	acme := map[uint64]bool{} // admitted acme permits not yet released, by order
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", n.trace, err)
		}
		switch l.Kind {
		case trace.KindDropped:
			t.Fatalf("%s: the recorder dropped lines", n.trace)
		case trace.KindDecision:
			if l.Decision.Answer == trace.AnswerAdmitted && l.Decision.Target.Tenant == "acme" {
				at := l.T
				for _, s := range l.Decision.Since {
					at = max(at, l.T+s)
				}
				acme[l.Order] = true
				evs = append(evs, ordered{l.Order, at, +1})
			}
		case trace.KindRelease, trace.KindStart:
			if l.Kind == trace.KindStart && !l.Move.Refused {
				continue
			}
			if acme[l.Move.Of] {
				delete(acme, l.Move.Of)
				evs = append(evs, ordered{l.Order, l.T, -1})
			}
		}
	}
	if len(acme) != 0 {
		t.Fatalf("%s: %d acme permits never released", n.trace, len(acme))
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].order < evs[j].order })
	steps := make([]liveStep, 0, len(evs))
	var last int64
	for _, e := range evs {
		last = max(last, e.t)
		steps = append(steps, liveStep{at: time.Unix(0, start+last), delta: e.delta, node: n.id})
	}
	return steps
}

// TestFleetNeverOverAcrossProcesses: three nodes, acme's fleet limit L,
// more clients holding acme's guest than L on every node. The fleet's
// live count, rebuilt from every node's recording (each activation's
// admission and release), never exceeds L, and the fleet uses the limit.
func TestFleetNeverOverAcrossProcesses(t *testing.T) {
	const limit = 6
	c, _ := startTestFleet(t, 3, limit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var got answers
	for _, n := range c.nodes {
		drive(ctx, &wg, n, "acme", 3, &got)
	}
	loadStart := time.Now()
	time.Sleep(10 * time.Second)
	cancel()
	wg.Wait()
	loadEnd := time.Now()
	for _, n := range c.nodes {
		if err := n.stop(fleetPatience); err != nil {
			t.Fatalf("node %s: %v", n.id, err)
		}
	}

	steps, admitted := fleetSteps(t, c.nodes)
	peak := neverOver(t, steps, limit)
	steady := loadStart.Add(3 * time.Second)
	for _, n := range c.nodes {
		if admitted[n.id] == 0 {
			t.Fatalf("node %s admitted no acme activation: %v", n.id, admitted)
		}
	}
	// etcd's whole history of acme's slices: at every revision they sum
	// to at most the limit.
	revisions, largest := sliceHistory(t, c, limit)
	t.Logf("etcd: %d revisions of acme's slices, largest sum %d", revisions, largest)

	// Each recording replays exactly under the same policy: the fleet
	// lines give the candidate the slices each decision judged.
	pol, err := os.ReadFile(c.policy)
	if err != nil {
		t.Fatal(err)
	}
	same, err := policy.DecodePolicy(pol)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		res, err := shadow.Replay(shadow.Config{Policy: same, Files: []string{n.trace}})
		if err != nil {
			t.Fatalf("node %s: replay: %v", n.id, err)
		}
		if res.Changed != 0 || res.Decisions == 0 {
			t.Errorf("node %s: %d of %d decisions changed when replayed under the same policy: %+v", n.id, res.Changed, res.Decisions, res.Changes)
		}
	}
	utilization := meanLive(steps, steady, loadEnd) / limit
	t.Logf("fleet live peak %d of %d; %v admitted by node; mean utilization over the last %.1fs of load: %.1f%%",
		peak, limit, admitted, loadEnd.Sub(steady).Seconds(), utilization*100)
	if peak != limit {
		t.Errorf("the fleet never reached its limit (peak %d of %d) with more clients than the limit", peak, limit)
	}
}

// fleetSteps reads the nodes' recordings (acmeSteps) and returns every
// change of acme's fleet live count on the shared clock, in time order,
// and how many activations each node admitted.
func fleetSteps(t *testing.T, nodes []*fleetNode) ([]liveStep, map[string]int) {
	t.Helper()
	var steps []liveStep
	admitted := map[string]int{}
	for _, n := range nodes {
		s := acmeSteps(t, n)
		for _, x := range s {
			if x.delta > 0 {
				admitted[n.id]++
			}
		}
		steps = append(steps, s...)
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	return steps, admitted
}

// neverOver fails when the fleet's live count goes over limit at any
// step, and returns its peak.
func neverOver(t *testing.T, steps []liveStep, limit int) (peak int) {
	t.Helper()
	live := 0
	for _, s := range steps {
		live += s.delta
		if live > limit {
			t.Fatalf("at %s the fleet held %d acme activations, over its limit %d (%s's step)", s.at.Format(time.RFC3339Nano), live, limit, s.node)
		}
		peak = max(peak, live)
	}
	return peak
}

// meanLive is the fleet's mean live count over [from, to].
func meanLive(steps []liveStep, from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	var area float64 // live × seconds
	live := 0
	add := func(a, b time.Time) {
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			area += float64(live) * b.Sub(a).Seconds()
		}
	}
	prev := from
	for _, s := range steps {
		add(prev, s.at)
		live += s.delta
		prev = s.at
	}
	add(prev, to)
	return area / to.Sub(from).Seconds()
}

// sliceHistory reads every change of acme's slice keys from etcd's first
// revision (a watch) and fails when the slices sum to more than limit at
// any revision; it returns how many revisions changed them and the
// largest sum.
func sliceHistory(t *testing.T, c *fleetCluster, limit int64) (revisions int, largest int64) {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcd.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), fleetPatience)
	defer cancel()
	prefix := "/latent/fleet/slices/acme/"
	// A last key under the prefix (the nodes have stopped) marks where
	// the history read ends.
	const end = "/latent/fleet/slices/acme/~end-of-test"
	put, err := client.Put(ctx, end, `{"has":0,"wants":0}`)
	if err != nil {
		t.Fatal(err)
	}
	head := put.Header.Revision
	has := map[string]int64{}
	sum := func() int64 {
		var s int64
		for _, v := range has {
			s += v
		}
		return s
	}
	wch := client.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1))
	var rev int64
	for rev < head {
		resp, ok := <-wch
		if !ok || resp.Err() != nil {
			t.Fatalf("watching acme's slices: %v", resp.Err())
		}
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision != rev && rev != 0 {
				s := sum()
				if s > limit {
					t.Fatalf("at revision %d acme's slices sum to %d, over the limit %d: %v", rev, s, limit, has)
				}
				largest = max(largest, s)
			}
			if ev.Kv.ModRevision != rev {
				revisions++
			}
			rev = ev.Kv.ModRevision
			if ev.Type == clientv3.EventTypeDelete {
				delete(has, string(ev.Kv.Key))
				continue
			}
			var v struct {
				Has int64 `json:"has"`
			}
			if err := json.Unmarshal(ev.Kv.Value, &v); err != nil {
				t.Fatalf("revision %d: %s: %v", rev, ev.Kv.Value, err)
			}
			has[string(ev.Kv.Key)] = v.Has
		}
		if s := sum(); s > limit {
			t.Fatalf("at revision %d acme's slices sum to %d, over the limit %d: %v", rev, s, limit, has)
		} else {
			largest = max(largest, s)
		}
	}
	return revisions, largest
}

// TestFleetDeadNodeSliceReturns: a node SIGKILLed with its slice full
// loses its lease; its slice leaves etcd within the TTL and a refresh or
// so, and the other two then admit up to the limit between them.
func TestFleetDeadNodeSliceReturns(t *testing.T) {
	const limit = 6
	c, _ := startTestFleet(t, 3, limit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var got answers
	for _, n := range c.nodes {
		drive(ctx, &wg, n, "acme", 4, &got)
	}
	dead := c.nodes[2]
	holds := func(node string) func() bool {
		return func() bool {
			tl, err := c.slices()
			if err != nil {
				return false
			}
			for _, s := range tl.Slices {
				if s.Node == node && s.Has > 0 {
					return true
				}
			}
			return false
		}
	}
	waitFor(t, "the node to be killed holds a slice in etcd", holds(dead.id))
	killed := time.Now()
	dead.kill()
	gone := waitFor(t, "the dead node's slice leaves etcd", func() bool {
		tl, err := c.slices()
		if err != nil {
			return false
		}
		for _, s := range tl.Slices {
			if s.Node == dead.id {
				return false
			}
		}
		return true
	})
	returned := gone.Sub(killed)
	full := waitFor(t, "the two live nodes hold and admit the whole limit", func() bool {
		var live uint64
		for _, n := range c.nodes[:2] {
			f, err := n.fleetStatus()
			if err != nil {
				return false
			}
			live += f.Live
		}
		return live == limit
	})
	t.Logf("the dead node's slice left etcd %v after SIGKILL (TTL %v); the other two held %d live %v later",
		returned.Round(time.Millisecond), fleetLeaseTTL, limit, full.Sub(gone).Round(time.Millisecond))
	// Generous for a loaded machine: the lease expires a TTL after the
	// last keep-alive etcd received, checked every 500ms; twice the TTL
	// still fails a slice that outlives its lease.
	if returned > 2*fleetLeaseTTL {
		t.Errorf("the dead node's slice left etcd %v after the kill, more than twice the TTL %v", returned, fleetLeaseTTL)
	}
}

// TestFleetPartitionFailsClosed: etcd SIGSTOPped for twice the TTL with
// fleet work running. From the slices' local deadline on (at most TTL −
// the wall-time ceiling − the slack after the stop) acme is refused,
// retryable, as fleet-unavailable on every node; globex is served
// throughout; after SIGCONT every node admits acme again, without a
// restart.
func TestFleetPartitionFailsClosed(t *testing.T) {
	const limit = 6
	c, _ := startTestFleet(t, 3, limit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var got answers
	for _, n := range c.nodes {
		drive(ctx, &wg, n, "acme", 3, &got)
		drive(ctx, &wg, n, "globex", 1, &got)
	}
	admittedSince := func(node string, since time.Time) bool {
		for _, a := range got.snapshot() {
			if a.node == node && a.tenant == "acme" && a.status == 200 && a.start.After(since) {
				return true
			}
		}
		return false
	}
	for _, n := range c.nodes {
		waitFor(t, "node "+n.id+" admits acme", func() bool { return admittedSince(n.id, time.Time{}) })
	}
	stopped := time.Now()
	if err := c.etcd.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * fleetLeaseTTL)
	if err := c.etcd.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	recovered := map[string]time.Duration{}
	for _, n := range c.nodes {
		at := waitFor(t, "node "+n.id+" admits acme again after SIGCONT", func() bool { return admittedSince(n.id, resumed) })
		recovered[n.id] = at.Sub(resumed)
	}
	cancel()
	wg.Wait()

	// The latest local deadline a keep-alive sent before the stop can
	// give: TTL − MaxGrant (the wall-time ceiling) − Slack after it.
	deadline := stopped.Add(fleetLeaseTTL - fleetWallMS*time.Millisecond - 500*time.Millisecond)
	failClosed := map[string]time.Duration{}
	globexServed, shed := map[string]int{}, 0
	for _, a := range got.snapshot() {
		inPause := a.start.After(stopped) && a.end.Before(resumed)
		switch {
		case a.err != nil:
			t.Fatalf("node %s, %s: %v", a.node, a.tenant, a.err)
		case a.reason == "node-overloaded":
			// Load shedding on a machine saturated by other work, which
			// refuses every tenant alike: nothing the partition did.
			shed++
		case a.tenant == "globex" && a.start.After(stopped) && a.start.Before(resumed):
			if a.status != 200 {
				t.Errorf("node %s refused globex (not fleet-limited) during the partition: %d %s", a.node, a.status, a.reason)
			}
			globexServed[a.node]++
		case a.tenant == "acme" && a.status == 200 && a.start.After(deadline) && a.start.Before(resumed):
			t.Errorf("node %s admitted acme at %v after the stop, past the latest local deadline (%v)",
				a.node, a.start.Sub(stopped), deadline.Sub(stopped))
		case a.tenant == "acme" && a.status == 200 && a.start.After(stopped) && a.end.After(deadline.Add(fleetWallMS*time.Millisecond)) && a.end.Before(resumed):
			t.Errorf("node %s: an acme activation admitted before the deadline ran to %v after the stop, past the deadline plus the wall-time ceiling",
				a.node, a.end.Sub(stopped))
		case a.tenant == "acme" && a.reason == "fleet-unavailable" && inPause:
			if a.status != 503 || !a.retryable {
				t.Errorf("node %s: fleet-unavailable answered %d, retryable %v; want a retryable 503", a.node, a.status, a.retryable)
			}
			if d, ok := failClosed[a.node]; !ok || a.end.Sub(stopped) < d {
				failClosed[a.node] = a.end.Sub(stopped)
			}
		}
	}
	for _, n := range c.nodes {
		if _, ok := failClosed[n.id]; !ok {
			t.Errorf("node %s never refused acme as fleet-unavailable during the partition", n.id)
		}
		if globexServed[n.id] == 0 {
			t.Errorf("node %s served no globex request during the partition", n.id)
		}
	}
	t.Logf("failed closed after the stop (first fleet-unavailable answer): %v (latest deadline %v); admitting again after SIGCONT: %v; globex served during the partition: %v; shed as node-overloaded: %d",
		failClosed, deadline.Sub(stopped), recovered, globexServed, shed)
}

// An etcd that cannot be reached at start: latentd starts and serves,
// refuses acme (retryable 503 fleet-unavailable), logs the endpoint's
// error once, and does not retry without bound (its back-off).
func TestFleetUnreachableEtcdAtStartFailsClosed(t *testing.T) {
	dir := t.TempDir()
	pol, err := fleetPolicyJSON()
	if err != nil {
		t.Fatal(err)
	}
	policyFile, tokensFile := dir+"/policy.json", dir+"/tokens.json"
	if err := os.WriteFile(policyFile, pol, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokensFile, demo.TokensJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "-policy", policyFile, "-tokens", tokensFile, "-listen", "127.0.0.1:0",
		"-etcd", "http://127.0.0.1:1", "-node-id", "lonely", "-fleet-lease-ttl", "4s")
	addr := c.waitLine(t, "latentd: serving on http://")
	n := &fleetNode{id: "lonely", url: "http://" + addr}
	defer fleetHTTP.CloseIdleConnections()
	var a invokeAnswer
	for range 5 {
		a = n.invokeRoute("acme", "hello/greet") // the demonstration catalog's
		if a.err != nil || a.status != 503 || a.reason != "fleet-unavailable" || !a.retryable {
			t.Fatalf("acme with etcd unreachable: %d %q retryable %v (%v); want a retryable 503 fleet-unavailable", a.status, a.reason, a.retryable, a.err)
		}
	}
	// The failure is logged, naming the endpoint's error.
	waitFor(t, "the unreachable etcd is logged", func() bool {
		return strings.Contains(c.stderr.String(), "connection refused")
	})
	time.Sleep(3 * time.Second)
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range c.lines {
	}
	_ = c.cmd.Wait()
	log := c.stderr.String()
	if n := strings.Count(log, "connection refused"); n < 1 || n > 3 {
		t.Errorf("the refused connection is logged %d times, want once per kind of failure:\n%s", n, log)
	}
}
