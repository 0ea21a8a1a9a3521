package latentd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sendHost is send with the request's Host set to host.
func sendHost(t *testing.T, client *http.Client, base, method, path, host, token string) response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// hostRuleEndpoints are the administrator endpoints, the status API and
// /debug/, each with the answer an administrator gets from an allowed
// Host on the test node.
var hostRuleEndpoints = []struct {
	method, path string
	allowed      int
}{
	{http.MethodGet, "/v1/admin/snapshot", http.StatusOK},
	{http.MethodGet, "/v1/admin/status", http.StatusOK},
	{http.MethodPut, "/v1/admin/artifacts/sha256/" + strings.Repeat("b", 64), http.StatusBadRequest},
	{http.MethodPut, "/v1/admin/deployments/acme/fresh", http.StatusBadRequest},
	{http.MethodDelete, "/v1/admin/deployments/acme/nosuch", http.StatusNotFound},
	{http.MethodGet, "/debug/pprof/", http.StatusOK},
	{http.MethodGet, "/debug/pprof/heap", http.StatusOK},
	{http.MethodGet, "/debug/vars", http.StatusNotFound},
}

// checkHostRule runs the Host rule's cases against a node served at base.
func checkHostRule(t *testing.T, client *http.Client, base string) {
	port := base[strings.LastIndex(base, ":")+1:]
	for _, ep := range hostRuleEndpoints {
		for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example", "localhost.evil.example",
			"10.0.0.1", "[::2]:" + port, "[fd00::8]", "allowed.example.evil.example", "0.0.0.0:" + port, "127.1", "node.example:" + port} {
			t.Run(ep.method+" "+ep.path+" refuses Host "+host, func(t *testing.T) {
				r := sendHost(t, client, base, ep.method, ep.path, host, adminToken)
				wantEdgeError(t, r, http.StatusForbidden, "Host")
			})
		}
		for _, host := range []string{"127.0.0.1:" + port, "127.0.0.1", "127.8.9.10:" + port, "localhost:" + port, "LocalHost",
			"localhost.", "[::1]:" + port, "[::1]", "allowed.example:" + port, "ALLOWED.example", "[fd00::7]:" + port, "[FD00::7]"} {
			t.Run(ep.method+" "+ep.path+" answers Host "+host, func(t *testing.T) {
				if r := sendHost(t, client, base, ep.method, ep.path, host, adminToken); r.status != ep.allowed {
					t.Fatalf("%d, want %d: %s", r.status, ep.allowed, r.body)
				}
			})
		}
	}
	t.Run("the rest of the API answers any Host", func(t *testing.T) {
		if r := sendHost(t, client, base, http.MethodGet, "/v1/tenants/acme/usage", "evil.example", aliceToken); r.status != http.StatusOK {
			t.Errorf("usage: %d %s", r.status, r.body)
		}
		if r := sendHost(t, client, base, http.MethodGet, "/healthz", "evil.example", ""); r.status != http.StatusOK {
			t.Errorf("healthz: %d %s", r.status, r.body)
		}
	})
}

func TestTheHostRule(t *testing.T) {
	allow := func(c *Config) { c.AllowedHosts = []string{"Allowed.Example.", "[fd00::7]"} }
	t.Run("on the node's own server", func(t *testing.T) {
		tn := startNode(t, nodeOptions{mutate: allow})
		checkHostRule(t, tn.client, tn.url)
	})
	t.Run("on another server serving Handler", func(t *testing.T) {
		guests := newFakeGuests()
		n, err := New(testConfig(t, guests, nodeOptions{mutate: allow}))
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		server := &http.Server{Handler: n.Handler(), ReadHeaderTimeout: 10 * time.Second}
		served := make(chan error, 1)
		go func() { served <- server.Serve(l) }()
		client := &http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}
		defer func() {
			client.CloseIdleConnections()
			if err := server.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Error(err)
			}
			close(guests.hold)
			if err := n.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}()
		checkHostRule(t, client, "http://"+l.Addr().String())
	})
}

// scrapeMetrics GETs /metrics with token and parses the exposition.
func scrapeMetrics(t *testing.T, tn *testNode, token string) map[string][]map[string]string {
	t.Helper()
	r := tn.do(http.MethodGet, "/metrics", token, nil)
	if r.status != http.StatusOK {
		t.Fatalf("scrape with %q: %d %s", token, r.status, r.body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	out := map[string][]map[string]string{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[name] = append(out[name], labels)
		}
	}
	return out
}

// hasSeries reports whether some series of name carries every label of want.
func hasSeries(scrape map[string][]map[string]string, name string, want map[string]string) bool {
	for _, labels := range scrape[name] {
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if match {
			return true
		}
	}
	return false
}

func TestMetricsAccess(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	if r := tn.invoke("acme/echo/run", aliceToken, "x"); r.status != http.StatusOK {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	tenants := []string{"acme", "globex"}
	node := map[string]string{"scope": "node", "name": "", "dimension": "live-activations"}
	tenantSeries := map[string]string{"scope": "tenant", "name": "acme", "dimension": "live-activations"}
	for _, who := range []struct{ name, token string }{{"anonymous", ""}, {"a tenant's token", aliceToken}} {
		t.Run(who.name+" gets node-level series and no tenant", func(t *testing.T) {
			s := scrapeMetrics(t, tn, who.token)
			for _, name := range []string{"latent_admission_admitted_total", "latent_admission_rejected_total", "latent_node_activations_total",
				"latent_node_queue_wait_seconds", "latent_admission_load_pressure"} {
				if len(s[name]) == 0 {
					t.Errorf("no %s", name)
				}
			}
			for _, name := range []string{"latent_admission_reserved", "latent_admission_limit"} {
				if !hasSeries(s, name, node) {
					t.Errorf("no node-scope %s", name)
				}
			}
			for name, series := range s {
				for _, labels := range series {
					for k, v := range labels {
						for _, tenant := range tenants {
							if v == tenant || k == "tenant" || (k == "scope" && v == "tenant") {
								t.Errorf("%s%v names a tenant", name, labels)
							}
						}
					}
				}
			}
		})
	}
	for _, who := range []struct{ name, token string }{{"an administrator", adminToken}, {"a metrics token", metricsToken}} {
		t.Run(who.name+" gets every series", func(t *testing.T) {
			s := scrapeMetrics(t, tn, who.token)
			for _, name := range []string{"latent_admission_reserved", "latent_admission_limit"} {
				if !hasSeries(s, name, node) || !hasSeries(s, name, tenantSeries) {
					t.Errorf("%s: node %v, acme %v", name, hasSeries(s, name, node), hasSeries(s, name, tenantSeries))
				}
				for _, tenant := range tenants {
					if !hasSeries(s, name, map[string]string{"scope": "tenant", "name": tenant}) {
						t.Errorf("%s: no series of %s", name, tenant)
					}
				}
			}
		})
	}
	t.Run("an unknown token is 401", func(t *testing.T) {
		wantEdgeError(t, tn.do(http.MethodGet, "/metrics", "nobody's", nil), http.StatusUnauthorized, "Authorization")
	})
	t.Run("a metrics token opens nothing else", func(t *testing.T) {
		for _, path := range []string{"/v1/admin/snapshot", "/v1/admin/status"} {
			wantEdgeError(t, tn.do(http.MethodGet, path, metricsToken, nil), http.StatusForbidden, "")
		}
		r := tn.do(http.MethodGet, "/v1/tenants/acme/usage", metricsToken, nil)
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
		r = tn.invoke("acme/echo/run", metricsToken, "x")
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	})
}

func TestUsageRefusesAPrincipalThePolicyNoLongerLists(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	invoked := tn.invoke("acme/echo/run", revokedToken, "x")
	wantRejection(t, invoked, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	revoked := tn.do(http.MethodGet, "/v1/tenants/acme/usage", revokedToken, nil)
	wantRejection(t, revoked, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	other := tn.do(http.MethodGet, "/v1/tenants/acme/usage", bobToken, nil)
	revoked.header.Del("Date")
	other.header.Del("Date")
	if fmt.Sprint(revoked) != fmt.Sprint(other) {
		t.Errorf("a revoked principal's answer differs from another tenant's:\n%v\n%v", revoked, other)
	}
	if r := tn.do(http.MethodGet, "/v1/tenants/acme/usage", aliceToken, nil); r.status != http.StatusOK {
		t.Errorf("a listed principal: %d %s", r.status, r.body)
	}
}

func TestSnapshotAndUsageAreNotCached(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for _, c := range []struct{ path, token string }{
		{"/v1/admin/snapshot", adminToken},
		{"/v1/admin/status", adminToken},
		{"/v1/tenants/acme/usage", aliceToken},
		{"/v1/tenants/acme/usage", adminToken},
		{"/v1/tenants/acme/usage", bobToken},
	} {
		r := tn.do(http.MethodGet, c.path, c.token, nil)
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s with %s: %d, Cache-Control %q", c.path, c.token, r.status, got)
		}
	}
}

func TestNewReturnsItsErrorsAndUndoesWhatItStarted(t *testing.T) {
	dir := t.TempDir()
	tn := startNode(t, nodeOptions{storeDir: dir})
	module := []byte("\x00asm\x01\x00\x00\x00 stored")
	hexDigest := digestHex(string(module))
	if r := tn.do(http.MethodPut, "/v1/admin/artifacts/sha256/"+hexDigest, adminToken, module); r.status != http.StatusOK {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	deployment := strings.Replace(`{"tenant":"acme","service":"stored","routes":[{"route":"run","contract":"demo.v1","function":"run","revisions":[
 {"release":{"artifact_digest":"DIGEST","version":"1"},"weight":1,"policy":{"trust_class":"standard","backend":"wasm",
  "threading":"single","state_model":"stateless","features":[],"call_depth_limit":1,"capsule_ceiling":{},
  "deployment_ceiling":{"memory_bytes":8388608},"placement":{"architectures":[],"regions":[],"zones":[]}}}]}]}`, "DIGEST", "sha256:"+hexDigest, 1)
	if r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/stored", adminToken, []byte(deployment)); r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	tn.shutdown()

	t.Run("a stored deployment's missing artifact", func(t *testing.T) {
		_, err := New(testConfig(t, newFakeGuests(), nodeOptions{storeDir: dir}))
		if err == nil || !strings.Contains(err.Error(), hexDigest) {
			t.Fatalf("%v, want an error naming %s", err, hexDigest)
		}
	})
	t.Run("a load sampler that cannot read", func(t *testing.T) {
		guests := newFakeGuestsFrom(tn.guests)
		_, err := New(testConfig(t, guests, nodeOptions{storeDir: dir, load: "no-such-fixture"}))
		if err == nil || !strings.Contains(err.Error(), "load sampler") {
			t.Fatalf("%v, want the load sampler's error", err)
		}
	})
	t.Run("the store is released, so a node starts on it again", func(t *testing.T) {
		guests := newFakeGuestsFrom(tn.guests)
		n, err := New(testConfig(t, guests, nodeOptions{storeDir: dir}))
		if err != nil {
			t.Fatal(err)
		}
		again := serveNode(t, n, guests)
		if r := again.invoke("acme/stored/run", aliceToken, "back"); r.status != http.StatusOK || string(r.body) != "echo:back" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}
