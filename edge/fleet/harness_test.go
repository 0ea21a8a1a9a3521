package fleet

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The timing of the tests' brokers: a short lease so the failure tests
// are quick, and the rest sized from it (docs/fleet.md).
const (
	testTTL       = 4 * time.Second
	testMaxGrant  = 300 * time.Millisecond
	testSlack     = 500 * time.Millisecond
	testKeepAlive = 500 * time.Millisecond
	testRefresh   = 100 * time.Millisecond
	testRequest   = time.Second
)

func sortEvents(events []event) {
	slices.SortStableFunc(events, func(a, b event) int { return a.at.Compare(b.at) })
}

// testNode is one in-process node: its own etcd client and lease, a
// broker and a reference sink.
type testNode struct {
	id     string
	client *clientv3.Client
	sink   *refSink
	broker *Broker
	cancel context.CancelFunc
	done   chan struct{}
}

func startNode(t *testing.T, e *etcdServer, id string, rec *recorder, tenants []string, local map[string]int64, logs *syncBuffer) *testNode {
	t.Helper()
	n := &testNode{id: id, client: e.client(t), sink: newRefSink(id, rec, local), done: make(chan struct{})}
	var ts []Tenant
	for _, name := range tenants {
		ts = append(ts, Tenant{Name: name, MaxGrant: testMaxGrant})
	}
	logger := slog.New(slog.NewTextHandler(logWriter(t, logs), &slog.HandlerOptions{Level: slog.LevelInfo}))
	b, err := New(Config{
		Client: n.client, NodeID: id, Tenants: ts, Sink: n.sink, Usage: n.sink,
		TTL: testTTL, Slack: testSlack, KeepAlive: testKeepAlive, Refresh: testRefresh, RequestTimeout: testRequest,
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.broker = b
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { defer close(n.done); b.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

func (n *testNode) stop() {
	n.cancel()
	<-n.done
}

func logWriter(t *testing.T, logs *syncBuffer) io.Writer {
	if logs == nil {
		return testLog{t}
	}
	return io.MultiWriter(logs, testLog{t})
}

// testLog writes the broker's log lines into the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// workers run n clients of tenant against sink: each admits, holds for
// hold (less than the tenant's MaxGrant), releases, and after a refusal
// tries again 2ms later. They stop when ctx ends.
func workers(ctx context.Context, wg *sync.WaitGroup, sink *refSink, tenant string, n int, hold func() time.Duration) {
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if sink.Admit(tenant) != nil {
					sleep(ctx, 2*time.Millisecond)
					continue
				}
				time.Sleep(hold())
				sink.Release(tenant)
			}
		}()
	}
}

func randomHold(lo, hi time.Duration) func() time.Duration {
	return func() time.Duration { return lo + rand.N(hi-lo) }
}

// setLimit writes tenant's fleet limit.
func setLimit(t *testing.T, c *clientv3.Client, tenant, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := c.Put(ctx, LimitKey("", tenant), value); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing after patience.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > patience {
			t.Fatalf("after %v: %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// slicesInEtcd reads every slice of tenant now: node ID to has.
func slicesInEtcd(t *testing.T, c *clientv3.Client, tenant string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	prefix := "/latent/fleet/slices/" + tenant + "/"
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, kv := range resp.Kvs {
		v, err := decodeSlice(string(kv.Key), kv.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(string(kv.Key), prefix)] = v.Has
	}
	return out
}

// checkHistory reads the whole history of tenant's slices from the first
// revision and checks that at every revision they sum to at most limit;
// it returns the number of revisions checked and the largest sum. It
// writes a sentinel slice of 0 and reads until it.
func checkHistory(t *testing.T, c *clientv3.Client, tenant string, limit int64) (revisions int, peak int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	prefix := "/latent/fleet/slices/" + tenant + "/"
	sentinel := prefix + "~history-end"
	if _, err := c.Put(ctx, sentinel, encodeSlice(sliceValue{})); err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	var sum, rev int64
	check := func() {
		revisions++
		peak = max(peak, sum)
		if sum > limit {
			t.Errorf("at revision %d the slices of %s sum to %d, over the limit %d: %v", rev, tenant, sum, limit, held)
		}
	}
	wch := c.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(1))
	for {
		resp, ok := <-wch
		if !ok || resp.Err() != nil {
			t.Fatalf("watching %s from revision 1: %v (channel open %v)", prefix, resp.Err(), ok)
		}
		for _, ev := range resp.Events {
			if rev != 0 && ev.Kv.ModRevision != rev {
				check()
			}
			rev = ev.Kv.ModRevision
			key := string(ev.Kv.Key)
			if key == sentinel {
				check()
				return revisions, peak
			}
			sum -= held[key]
			delete(held, key)
			if ev.Type == mvccpb.PUT {
				v, err := decodeSlice(key, ev.Kv.Value)
				if err != nil {
					t.Fatal(err)
				}
				held[key] = v.Has
				sum += v.Has
			}
		}
	}
}
