package latentd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/edge/fleet/etcdproc"

	"latent.dev/admission/policy"
)

// A node whose policy marks a fleet-limited tenant but that has no etcd
// refuses that tenant (retryable 503 fleet-unavailable), serves the
// others, says so once in its log, and shows the tenant on the status
// page without a slice.
func TestFleetTenantWithoutEtcdFailsClosed(t *testing.T) {
	var logs lockedBuffer
	tn := startNode(t, nodeOptions{
		policy: func(p *policy.NodeAdmissionPolicy) { p.Fleet.Tenants = []string{"acme"} },
		mutate: func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) },
	})
	for range 3 {
		r := tn.invoke("acme/echo/run", aliceToken, "x")
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("acme without etcd: status %d, body %s; want 503", r.status, r.body)
		}
		m := r.json(t)
		if m["reason"] != "fleet-unavailable" || m["retryable"] != true {
			t.Fatalf("acme without etcd: %s; want a retryable fleet-unavailable", r.body)
		}
	}
	if r := tn.invoke("globex/echo/run", bobToken, "hi"); r.status != http.StatusOK {
		t.Fatalf("globex (not fleet-limited): status %d, body %s", r.status, r.body)
	}
	if n := strings.Count(logs.String(), "no etcd is configured"); n != 1 {
		t.Fatalf("the warning is logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "tenants=acme") {
		t.Fatalf("the warning does not name the tenant:\n%s", logs.String())
	}
	r := tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	var st statusJSON
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Fatal(err)
	}
	want := []statusFleetJSON{{Tenant: "acme", Limit: -1}}
	if len(st.Fleet) != 1 || st.Fleet[0] != want[0] {
		t.Fatalf("status fleet = %+v, want %+v", st.Fleet, want)
	}
}

// A policy without a fleet block has no fleet section in its status.
func TestNoFleetSectionWithoutFleetTenants(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	r := tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil)
	if bytes.Contains(r.body, []byte(`"fleet"`)) {
		t.Fatalf("status without fleet tenants names a fleet: %s", r.body)
	}
}

// A node with a real etcd: its broker takes a slice of acme's fleet
// limit, admission admits under it, the status page shows the slice,
// its validity, the live use and the limit, and Shutdown stops the
// broker's goroutines (TestMain's goleak) and revokes its lease, so the
// slice leaves etcd at once.
func TestFleetBrokerOwnedByTheNode(t *testing.T) {
	e, err := etcdproc.Start(t.TempDir(), patience)
	if errors.Is(err, etcdproc.ErrMissing) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v, and CI is set", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	client, err := fleet.NewClient(fleet.ClientOptions{Endpoints: []string{e.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := fleet.SetLimit(ctx, client, "", "acme", 5); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	guests := newFakeGuests()
	n, err := New(testConfig(t, guests, nodeOptions{
		policy: func(p *policy.NodeAdmissionPolicy) {
			p.Fleet.Tenants = []string{"acme"}
			p.Node.BudgetCeiling.WallTime = time.Second
		},
		mutate: func(c *Config) {
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			c.Fleet = &FleetConfig{Client: client, NodeID: "node-a", TTL: 4 * time.Second, Refresh: 100 * time.Millisecond}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	tn := serveNode(t, n, guests)
	tn.closeHold()
	var r response
	for deadline := time.Now().Add(patience); ; time.Sleep(20 * time.Millisecond) {
		if r = tn.invoke("acme/echo/run", aliceToken, "x"); r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme never admitted under a slice: %d %s\n%s", r.status, r.body, logs.String())
		}
	}
	var st statusJSON
	if err := json.Unmarshal(tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil).body, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Fleet) != 1 || st.Fleet[0].Tenant != "acme" || !st.Fleet[0].Broker || !st.Fleet[0].Published ||
		st.Fleet[0].Slice < 1 || st.Fleet[0].ValidForMS <= 0 || st.Fleet[0].Limit != 5 || st.Fleet[0].Held < st.Fleet[0].Slice {
		t.Fatalf("status fleet = %+v", st.Fleet)
	}
	metrics := tn.do(http.MethodGet, "/metrics", adminToken, nil)
	if !bytes.Contains(metrics.body, []byte(`latent_fleet_limit{tenant="acme"} 5`)) {
		t.Fatalf("/metrics has no latent_fleet_limit for acme:\n%s", metrics.body)
	}
	// Without a token: the node's fleet series, none that names a tenant.
	anonymous := tn.do(http.MethodGet, "/metrics", "", nil)
	if bytes.Contains(anonymous.body, []byte(`tenant="acme"`)) || !bytes.Contains(anonymous.body, []byte("latent_fleet_etcd_up 1")) {
		t.Fatalf("anonymous /metrics: want latent_fleet_etcd_up and no tenant's series:\n%s", anonymous.body)
	}
	tn.shutdown()
	tl, err := fleet.GetLimit(ctx, client, "", "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Slices) != 0 {
		t.Fatalf("after shutdown etcd still holds %+v: the lease was not revoked", tl.Slices)
	}
}
