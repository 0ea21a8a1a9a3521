package latentd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

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
