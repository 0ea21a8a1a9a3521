package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// hookedUsage reports a fixed live count and runs hook the first time the
// broker reads it: between the round's read of etcd and its transaction.
type hookedUsage struct {
	live int64
	once sync.Once
	hook func()
}

func (u *hookedUsage) Live(string) int64 {
	u.once.Do(u.hook)
	return u.live
}

func (u *hookedUsage) Refused(string) uint64 { return 0 }

// TestStaleReadLosesTheRace: another node takes most of the limit after a
// round read the slices and before it writes. The round's transaction,
// which compares the tenant's revision, fails; the next attempt reads
// the new slices and takes only what is free, so the sum never exceeds
// the limit. Without the comparison the write would put the sum over.
func TestStaleReadLosesTheRace(t *testing.T) {
	e := startEtcd(t, nil)
	const limit = 10
	admin := e.client(t)
	setLimit(t, admin, "acme", "10")
	rival := "/latent/fleet/slices/acme/node-rival"
	usage := &hookedUsage{live: 5, hook: func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if _, err := admin.Put(ctx, rival, encodeSlice(sliceValue{Has: 8, Wants: 8})); err != nil {
			t.Error(err)
		}
	}}
	sink := newRefSink("node-a", nil, nil)
	b, err := New(Config{
		Client: e.client(t), NodeID: "node-a", Tenants: []Tenant{{Name: "acme", MaxGrant: testMaxGrant}},
		Sink: sink, Usage: usage, TTL: testTTL, Slack: testSlack, KeepAlive: testKeepAlive, Refresh: testRefresh,
		RequestTimeout: testRequest, Logger: slog.New(slog.NewTextHandler(testLog{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "node-a to take what is free", func() bool {
		s := slicesInEtcd(t, admin, "acme")
		if s["node-a"]+s["node-rival"] > limit {
			t.Fatalf("the slices sum over the limit %d: %v", limit, s)
		}
		return s["node-a"] == 2
	})
	if got := sink.slice("acme").slice; got != 2 {
		t.Fatalf("the sink holds %d, want 2", got)
	}
	if conflicts := testutil.ToFloat64(b.metrics.conflicts); conflicts < 1 {
		t.Fatal("no transaction lost the race")
	}
	cancel()
	<-done
	checkHistory(t, admin, "acme", limit)
}

// TestNeverBelowLive: the limit is lowered under a node holding live
// activations. The node stops admitting above its new share at once, but
// its slice in etcd never drops below its live count; it returns the
// rest as the activations end, down to the new limit.
func TestNeverBelowLive(t *testing.T) {
	e := startEtcd(t, nil)
	admin := e.client(t)
	setLimit(t, admin, "acme", "10")
	n := startNode(t, e, "node-a", nil, []string{"acme"}, nil, nil)
	held := 0
	waitFor(t, "node-a to admit 6", func() bool {
		for held < 6 && n.sink.Admit("acme") == nil {
			held++
		}
		return held == 6
	})
	setLimit(t, admin, "acme", "3")
	waitFor(t, "node-a to admit under the new limit", func() bool { return n.sink.slice("acme").slice <= 3 })
	if err := n.sink.Admit("acme"); !errors.Is(err, errFull) {
		t.Fatalf("with 6 live and a limit of 3 the sink answered %v, want full", err)
	}
	check := func() {
		if s := slicesInEtcd(t, admin, "acme")["node-a"]; s < n.sink.Live("acme") {
			t.Fatalf("node-a's slice in etcd is %d, below its live count %d", s, n.sink.Live("acme"))
		}
	}
	for range 20 { // two rounds' worth of checks, every 10ms
		check()
		time.Sleep(10 * time.Millisecond)
	}
	for ; held > 0; held-- {
		n.sink.Release("acme")
		// New work waits until usage falls below the new share.
		if live := n.sink.Live("acme"); live >= 3 {
			if err := n.sink.Admit("acme"); !errors.Is(err, errFull) {
				t.Fatalf("with %d live after a release and a limit of 3 the sink answered %v, want full", live, err)
			}
		}
		check()
		time.Sleep(testRefresh)
		check()
	}
	waitFor(t, "node-a's slice to return down to the new limit", func() bool { return slicesInEtcd(t, admin, "acme")["node-a"] <= 3 })
}
