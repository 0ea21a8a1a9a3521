package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"latent.dev/admission/edge/fleet/etcdproc"
)

// runFor runs a node's broker with clients of acme for d and returns
// how many admissions it made.
func admitFor(n *testNode, d time.Duration) (admitted int, last error) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := n.sink.Admit("acme"); err != nil {
			last = err
			continue
		}
		admitted++
		n.sink.Release("acme")
	}
	return admitted, last
}

func countLines(logs *syncBuffer, sub string) int {
	return strings.Count(logs.String(), sub)
}

// TestUnreachableAtStart: a broker whose etcd endpoint answers nothing
// logs the failure naming the endpoint once, keeps the tenant refused as
// unavailable, and backs off: its attempts stay few.
func TestUnreachableAtStart(t *testing.T) {
	requireEtcd(t)
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	e := &etcdServer{endpoint: endpoint}
	logs := &syncBuffer{}
	n := startNode(t, e, "node-a", nil, []string{"acme"}, nil, logs)
	admitted, last := admitFor(n, 4*time.Second)
	if admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("with etcd unreachable: %d admitted, last refusal %v; want none admitted, refused as unavailable", admitted, last)
	}
	n.stop()
	if got := countLines(logs, "fleet: etcd request failed"); got < 1 || got > len(failureKinds) {
		t.Fatalf("%d lines for the failure, want one per kind of failure at most:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), endpoint) {
		t.Fatalf("the log does not name the endpoint %s:\n%s", endpoint, logs.String())
	}
	// 4 seconds of back-off from 100ms, doubling: a handful of grants.
	if grants := testutil.ToFloat64(n.broker.metrics.requests.WithLabelValues(opGrant)); grants < 1 || grants > 10 {
		t.Fatalf("%v grant requests in 4s, want between 1 and 10 (a bounded back-off)", grants)
	}
	if testutil.ToFloat64(n.broker.metrics.up) != 0 {
		t.Fatal("latent_fleet_etcd_up is not 0 with etcd unreachable")
	}
}

// TestWrongCertificate: etcd serves a certificate from a CA the client
// does not trust: the log says so, and the tenant stays refused.
func TestWrongCertificate(t *testing.T) {
	e := startEtcd(t, writeTLSFiles(t, "etcd"))
	wrong := writeTLSFiles(t, "another")
	logs := &syncBuffer{}
	impostor := &etcdServer{endpoint: e.endpoint, tls: wrong}
	n := startNode(t, impostor, "node-a", nil, []string{"acme"}, nil, logs)
	admitted, last := admitFor(n, 3*time.Second)
	n.stop()
	if admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("with an untrusted certificate: %d admitted, last refusal %v; want none admitted, refused as unavailable", admitted, last)
	}
	if !strings.Contains(logs.String(), "certificate") {
		t.Fatalf("the log does not name the certificate problem:\n%s", logs.String())
	}
	// The right CA works: the failure was the certificate.
	setLimit(t, e.client(t), "acme", "3")
	good := startNode(t, e, "node-b", nil, []string{"acme"}, nil, nil)
	waitFor(t, "node-b to admit with the right CA", func() bool {
		if good.sink.Admit("acme") != nil {
			return false
		}
		good.sink.Release("acme")
		return true
	})
}

// TestClientCertificateRefused: etcd requires client certificates of its
// CA and the node presents one of another CA. With TLS 1.3 the client's
// handshake ends before etcd judges the certificate, so the gRPC
// connection often fails with "connection reset by peer", which names
// nothing; the failure's line names the certificate all the same (the
// broker's own handshake reads etcd's alert), and the tenant stays
// refused.
func TestClientCertificateRefused(t *testing.T) {
	right, other := writeTLSFiles(t, "etcd"), writeTLSFiles(t, "another")
	e := startEtcdWith(t, etcdproc.Options{TLS: right, ClientCertAuth: true})
	logs := &syncBuffer{}
	impostor := &etcdServer{endpoint: e.endpoint, tls: right, cert: other}
	n := startNode(t, impostor, "node-a", nil, []string{"acme"}, nil, logs)
	waitFor(t, "the failure to be logged", func() bool { return countLines(logs, "fleet: etcd request failed") > 0 })
	admitted, last := admitFor(n, time.Second)
	n.stop()
	if admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("with a client certificate etcd does not trust: %d admitted, last refusal %v; want none admitted, refused as unavailable", admitted, last)
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "fleet: etcd request failed") && (!strings.Contains(l, "certificate") || !strings.Contains(l, e.endpoint)) {
			t.Fatalf("a failure's line does not name the certificate and the endpoint %s:\n%s", e.endpoint, l)
		}
	}
	// The right certificate works: the failure was the certificate.
	setLimit(t, e.client(t), "acme", "3")
	good := startNode(t, e, "node-b", nil, []string{"acme"}, nil, nil)
	waitFor(t, "node-b to admit with the right certificate", func() bool {
		if good.sink.Admit("acme") != nil {
			return false
		}
		good.sink.Release("acme")
		return true
	})
}

// TestUndecodableValues: a limit that is not a decimal integer, and a
// slice of another node that is not the broker's JSON, each make the
// tenant fail closed with one log line naming the key; fixed, the tenant
// is admitted again. Another tenant is unaffected.
func TestUndecodableValues(t *testing.T) {
	e := startEtcd(t, nil)
	admin := e.client(t)
	setLimit(t, admin, "acme", "ten")
	setLimit(t, admin, "other", "5")
	logs := &syncBuffer{}
	n := startNode(t, e, "node-a", nil, []string{"acme", "other"}, nil, logs)
	admitOne := func(tenant string) func() bool {
		return func() bool {
			if n.sink.Admit(tenant) != nil {
				return false
			}
			n.sink.Release(tenant)
			return true
		}
	}
	waitFor(t, "the other tenant to be admitted", admitOne("other"))
	waitFor(t, "a log line naming the limit key", func() bool {
		return strings.Contains(logs.String(), `/latent/fleet/limits/acme`)
	})
	if admitted, last := admitFor(n, time.Second); admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("with an undecodable limit: %d admitted, last refusal %v", admitted, last)
	}
	if got := countLines(logs, "limits/acme"); got != 1 {
		t.Fatalf("the bad limit was logged %d times over many rounds, want once:\n%s", got, logs.String())
	}
	setLimit(t, admin, "acme", "4")
	waitFor(t, "acme to be admitted once its limit decodes", admitOne("acme"))

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	rogue := "/latent/fleet/slices/acme/rogue"
	if _, err := admin.Put(ctx, rogue, `{"has":1}`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a log line naming the rogue slice key", func() bool { return strings.Contains(logs.String(), rogue) })
	if admitted, last := admitFor(n, time.Second); admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("with an undecodable slice: %d admitted, last refusal %v", admitted, last)
	}
	waitFor(t, "the other tenant to be admitted", admitOne("other"))
	if _, err := admin.Delete(ctx, rogue); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "acme to be admitted once the rogue slice is gone", admitOne("acme"))
	if n.broker.metrics.failClosed.WithLabelValues("acme") == nil || testutil.ToFloat64(n.broker.metrics.failClosed.WithLabelValues("acme")) != 0 {
		t.Fatal("latent_fleet_fail_closed for acme is not back to 0")
	}
}

// TestNodeIDInUse: a second broker with the same node ID finds the slice
// key under a lease not its own and fails closed, naming it; the first
// keeps its slice.
func TestNodeIDInUse(t *testing.T) {
	e := startEtcd(t, nil)
	admin := e.client(t)
	setLimit(t, admin, "acme", "6")
	first := startNode(t, e, "node-a", nil, []string{"acme"}, nil, nil)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); wg.Wait() }()
	workers(ctx, &wg, first.sink, "acme", 2, randomHold(20*time.Millisecond, 40*time.Millisecond))
	waitFor(t, "node-a to hold a slice", func() bool { return slicesInEtcd(t, admin, "acme")["node-a"] > 0 })
	logs := &syncBuffer{}
	twin := startNode(t, e, "node-a", nil, []string{"acme"}, nil, logs)
	waitFor(t, "the twin to log the node ID in use", func() bool {
		return strings.Contains(logs.String(), "held by another lease")
	})
	if admitted, last := admitFor(twin, time.Second); admitted != 0 || !errors.Is(last, errUnavailable) {
		t.Fatalf("the twin admitted %d, last refusal %v", admitted, last)
	}
}

func TestConfigErrors(t *testing.T) {
	sink := newRefSink("n", nil, nil)
	c, err := NewClient(ClientOptions{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := Config{Client: c, NodeID: "n", Sink: sink, Usage: sink, Tenants: []Tenant{{Name: "acme", MaxGrant: time.Second}}}
	if _, err := New(good); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		names  string
	}{
		{"no client", func(c *Config) { c.Client = nil }, "Client"},
		{"a node ID with a slash", func(c *Config) { c.NodeID = "a/b" }, "NodeID"},
		{"a TTL under etcd's smallest", func(c *Config) { c.TTL = time.Second }, "TTL"},
		{"a TTL not in whole seconds", func(c *Config) { c.TTL = 2500 * time.Millisecond }, "TTL"},
		{"a grant that leaves the slice to lapse between keep-alives", func(c *Config) { c.Tenants = []Tenant{{Name: "acme", MaxGrant: 8 * time.Second}} }, `tenant "acme"`},
		{"a tenant twice", func(c *Config) { c.Tenants = []Tenant{{Name: "x", MaxGrant: 1}, {Name: "x", MaxGrant: 1}} }, `tenant "x"`},
		{"no sink", func(c *Config) { c.Sink = nil }, "Sink"},
		{"a prefix without a slash", func(c *Config) { c.Prefix = "/latent" }, "Prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.names) {
				t.Fatalf("New: %v, want ErrConfig naming %s", err, tc.names)
			}
		})
	}
	if _, err := NewClient(ClientOptions{Endpoints: []string{"https://127.0.0.1:1"}, CAFile: "/nonexistent/ca.pem"}); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "/nonexistent/ca.pem") {
		t.Fatalf("NewClient with a missing CA file: %v, want an error naming it", err)
	}
}

func TestRunTwicePanics(t *testing.T) {
	sink := newRefSink("n", nil, nil)
	c, err := NewClient(ClientOptions{Endpoints: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := New(Config{Client: c, NodeID: "n", Sink: sink, Usage: sink, Tenants: []Tenant{{Name: "acme", MaxGrant: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.Run(ctx) // returns at once: the context has ended
	defer func() {
		if recover() == nil {
			t.Fatal("a second Run did not panic")
		}
	}()
	b.Run(ctx)
}
