package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/edge/fleet/etcdproc"
)

// The fleet's bad input through latentd processes: a wrong certificate
// and a value in etcd that does not decode (docs/fleet.md#failures).

// nodeLog is the lines of the cluster's log that node id wrote.
func nodeLog(logs *logBuffer, id string) string {
	var b strings.Builder
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.HasPrefix(l, id+": ") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// countIn counts the lines of log holding every one of subs.
func countIn(log string, subs ...string) int {
	n := 0
lines:
	for _, l := range strings.Split(log, "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue lines
			}
		}
		n++
	}
	return n
}

// metric reads the value of the first series of n's /metrics whose line
// starts with name and holds label.
func (n *fleetNode) metric(name, label string) (float64, bool) {
	req, err := http.NewRequest(http.MethodGet, n.url+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "Bearer "+DemoAdminToken)
	resp, err := fleetHTTP.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var body strings.Builder
	buf := make([]byte, 32<<10)
	for {
		k, err := resp.Body.Read(buf)
		body.Write(buf[:k])
		if err != nil || body.Len() > 16<<20 {
			break
		}
	}
	for _, l := range strings.Split(body.String(), "\n") {
		if strings.HasPrefix(l, name) && strings.Contains(l, label) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// alive fails the test when n has exited (a panic ends the process).
func alive(t *testing.T, n *fleetNode, logs *logBuffer) {
	t.Helper()
	select {
	case err := <-n.exited:
		n.exited <- err
		t.Fatalf("node %s exited (%v):\n%s", n.id, err, nodeLog(logs, n.id))
	default:
	}
	if l := nodeLog(logs, n.id); strings.Contains(l, "panic") {
		t.Fatalf("node %s logged a panic:\n%s", n.id, l)
	}
}

// refusesFleetServesOthers checks, several times, that n answers acme a
// retryable 503 fleet-unavailable and serves globex.
func refusesFleetServesOthers(t *testing.T, n *fleetNode) {
	t.Helper()
	for range 3 {
		if a := n.invoke("acme"); a.err != nil || a.status != 503 || a.reason != "fleet-unavailable" || !a.retryable {
			t.Fatalf("node %s answered acme %d %q, retryable %v (%v); want a retryable 503 fleet-unavailable", n.id, a.status, a.reason, a.retryable, a.err)
		}
		waitFor(t, "node "+n.id+" serves globex", func() bool {
			// A machine saturated by other work may shed load
			// (node-overloaded), which refuses every tenant alike.
			return n.invoke("globex").status == 200
		})
	}
}

// TestFleetWrongCertificateFailsClosed: etcd serves TLS and requires
// client certificates from its CA. A node given another CA (it does not
// trust etcd's certificate) and a node presenting a client certificate
// of another CA each log the failure naming the endpoint and the
// certificate, a bounded number of times, refuse acme (retryable, fleet-
// unavailable) and serve globex, back off (few grants), and do not
// panic; a node with the right files admits acme, so the certificates
// were the failure.
func TestFleetWrongCertificateFailsClosed(t *testing.T) {
	dir := t.TempDir()
	right, err := etcdproc.WriteTLS(filepath.Join(dir, "right"), "etcd")
	if err != nil {
		t.Fatal(err)
	}
	other, err := etcdproc.WriteTLS(filepath.Join(dir, "other"), "another")
	if err != nil {
		t.Fatal(err)
	}
	c, logs := startTestFleetWith(t, 6, etcdproc.Options{TLS: right, ClientCertAuth: true})
	good, err := c.addNode("good")
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := c.addNode("wrong-ca", "-etcd-ca", other.CA)
	if err != nil {
		t.Fatal(err)
	}
	wrongCert, err := c.addNode("wrong-cert", "-etcd-cert", other.Cert, "-etcd-key", other.Key)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the node with the right files admits acme", func() bool { return good.invoke("acme").status == 200 })
	for _, tc := range []struct {
		n    *fleetNode
		says string // what the log line says of the certificate
	}{
		{wrongCA, "x509: certificate signed by unknown authority"},
		{wrongCert, "certificate"}, // etcd's alert: "remote error: tls: bad certificate"
	} {
		failed := func() string {
			for _, l := range strings.Split(nodeLog(logs, tc.n.id), "\n") {
				if strings.Contains(l, "fleet: etcd request failed") {
					return l
				}
			}
			return ""
		}
		waitFor(t, "node "+tc.n.id+" logs the failed request", func() bool { return failed() != "" })
		if l := failed(); !strings.Contains(l, c.etcd.Endpoint) || !strings.Contains(l, tc.says) {
			t.Errorf("node %s: the failure's line does not name the endpoint %s and %q:\n%s", tc.n.id, c.etcd.Endpoint, tc.says, l)
		}
		refusesFleetServesOthers(t, tc.n)
	}
	// A window of 3s: a bounded back-off makes a few grants at most
	// (from 100ms, doubling, to 10s); a retry without one, hundreds.
	before := map[string]float64{}
	for _, n := range []*fleetNode{wrongCA, wrongCert} {
		v, ok := n.metric("latent_fleet_etcd_requests_total", `op="grant"`)
		if !ok {
			t.Fatalf("node %s: no latent_fleet_etcd_requests_total{op=\"grant\"} on /metrics", n.id)
		}
		before[n.id] = v
	}
	time.Sleep(3 * time.Second)
	for _, n := range []*fleetNode{wrongCA, wrongCert} {
		refusesFleetServesOthers(t, n)
		v, _ := n.metric("latent_fleet_etcd_requests_total", `op="grant"`)
		if v-before[n.id] > 10 {
			t.Errorf("node %s: %v grants in 3s with a wrong certificate, want a bounded back-off (10 at most)", n.id, v-before[n.id])
		}
		l := nodeLog(logs, n.id)
		if k := countIn(l, "fleet: etcd request failed"); k < 1 || k > 5 {
			t.Errorf("node %s: the failure logged %d times, want once per kind of failure (5 kinds at most):\n%s", n.id, k, l)
		}
		if countIn(l, "fleet: etcd answers again") != 0 {
			t.Errorf("node %s: etcd answered with a wrong certificate:\n%s", n.id, l)
		}
		alive(t, n, logs)
	}
	if a := good.invoke("globex"); a.status != 200 && a.reason != "node-overloaded" {
		t.Errorf("the good node answered globex %d %s", a.status, a.reason)
	}
}

// TestFleetUndecodableLimitFailsClosed: a value that does not decode
// written over acme's limit key with an etcd client. Each node logs a
// line naming the key once (not at every round), refuses acme (retryable
// fleet-unavailable) from then until the value is fixed, and its status
// page names the problem; globex is served throughout; nothing panics;
// the limit set again, every node admits acme again without a restart.
func TestFleetUndecodableLimitFailsClosed(t *testing.T) {
	const limit = 6
	c, logs := startTestFleet(t, 2, limit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var got answers
	for _, n := range c.nodes {
		drive(ctx, &wg, n, "acme", 2, &got)
		drive(ctx, &wg, n, "globex", 1, &got)
	}
	answered := func(node, reason string, status int, since time.Time) (time.Time, bool) {
		for _, a := range got.snapshot() {
			if a.node == node && a.tenant == "acme" && a.status == status && a.reason == reason && a.start.After(since) {
				return a.end, true
			}
		}
		return time.Time{}, false
	}
	for _, n := range c.nodes {
		waitFor(t, "node "+n.id+" admits acme", func() bool { _, ok := answered(n.id, "", 200, time.Time{}); return ok })
	}
	const key = "/latent/fleet/limits/acme"
	client, err := c.client()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	put, cancelPut := context.WithTimeout(context.Background(), fleetPatience)
	defer cancelPut()
	if _, err := client.Put(put, key, "six\x00{"); err != nil {
		t.Fatal(err)
	}
	broke := time.Now()
	refused := map[string]time.Time{}
	for _, n := range c.nodes {
		refused[n.id] = waitFor(t, "node "+n.id+" refuses acme as fleet-unavailable", func() bool {
			_, ok := answered(n.id, "fleet-unavailable", 503, broke)
			return ok
		})
		waitFor(t, "node "+n.id+" logs the key", func() bool { return countIn(nodeLog(logs, n.id), key) > 0 })
		waitFor(t, "node "+n.id+"'s status page names the problem", func() bool {
			f, err := n.fleetStatus()
			return err == nil && strings.Contains(f.Problem, key)
		})
	}
	time.Sleep(3 * time.Second) // three rounds or more, each reading the bad value
	for _, n := range c.nodes {
		if k := countIn(nodeLog(logs, n.id), key); k != 1 {
			t.Errorf("node %s logged the bad value %d times, want once until it changes:\n%s", n.id, k, nodeLog(logs, n.id))
		}
	}
	if err := c.setLimit(limit); err != nil {
		t.Fatal(err)
	}
	fixed := time.Now()
	for _, n := range c.nodes {
		waitFor(t, "node "+n.id+" admits acme again", func() bool { _, ok := answered(n.id, "", 200, fixed); return ok })
	}
	cancel()
	wg.Wait()
	served := map[string]int{}
	for _, a := range got.snapshot() {
		switch {
		case a.err != nil:
			t.Fatalf("node %s, %s: %v", a.node, a.tenant, a.err)
		case a.reason == "node-overloaded":
			// A machine saturated by other work: every tenant alike.
		case a.tenant == "globex" && a.start.After(broke) && a.end.Before(fixed):
			if a.status != 200 {
				t.Errorf("node %s refused globex while acme's limit did not decode: %d %s", a.node, a.status, a.reason)
			}
			served[a.node]++
		case a.tenant == "acme" && a.start.After(refused[a.node]) && a.end.Before(fixed):
			if a.status != 503 || a.reason != "fleet-unavailable" || !a.retryable {
				t.Errorf("node %s answered acme %d %q (retryable %v) while its limit did not decode; want a retryable 503 fleet-unavailable", a.node, a.status, a.reason, a.retryable)
			}
		}
	}
	for _, n := range c.nodes {
		if served[n.id] == 0 {
			t.Errorf("node %s served no globex request while acme's limit did not decode", n.id)
		}
		alive(t, n, logs)
	}
	t.Logf("refused acme after the bad value %v; globex served meanwhile %v", func() map[string]time.Duration {
		m := map[string]time.Duration{}
		for id, at := range refused {
			m[id] = at.Sub(broke).Round(time.Millisecond)
		}
		return m
	}(), served)
}
