package latentd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/catalog"
)

// rawExchange writes a request head over a fresh loopback connection, then
// writes body chunks until the server answers or all are written, and
// returns the status line and how many body bytes it wrote.
func rawExchange(t *testing.T, tn *testNode, head string, chunks func(i int) []byte, maxChunks int) (string, int) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(tn.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- line
	}()
	written := 0
	for i := 0; i < maxChunks; i++ {
		select {
		case line := <-answered:
			return line, written
		default:
		}
		_ = conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		n, err := conn.Write(chunks(i))
		written += n
		if err != nil {
			break // the server closed the connection after answering
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case line := <-answered:
		return line, written
	case <-time.After(patience):
		t.Fatal("no answer")
	}
	return "", written
}

// countingBody counts what the handler reads from the request body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func TestPayloadIsMeasuredAsRead(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	var read atomic.Int64
	inner := tn.node.server.Handler
	tn.node.server.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, &read}
		inner.ServeHTTP(w, r)
	})
	const block = 1024
	chunk := []byte(strings.Repeat("z", block))
	auth := "Authorization: Bearer " + bobToken + "\r\n"

	t.Run("a Content-Length far beyond the body it announces: 413 without reading it all", func(t *testing.T) {
		read.Store(0)
		head := "POST /v1/invoke/globex/echo/run HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 104857600\r\n\r\n"
		line, written := rawExchange(t, tn, head, func(int) []byte { return chunk }, 100*1024)
		if !strings.Contains(line, " 413 ") {
			t.Fatalf("status line %q", line)
		}
		if got := read.Load(); got != 4097 {
			t.Errorf("the handler read %d bytes, want the maximum plus one (4097)", got)
		}
		if written >= 104857600 {
			t.Errorf("the whole body was written (%d bytes)", written)
		}
	})
	t.Run("a chunked body over the maximum: 413 without reading it all", func(t *testing.T) {
		read.Store(0)
		head := "POST /v1/invoke/globex/echo/run HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n"
		frame := []byte(fmt.Sprintf("%x\r\n%s\r\n", block, chunk))
		line, written := rawExchange(t, tn, head, func(int) []byte { return frame }, 100*1024)
		if !strings.Contains(line, " 413 ") {
			t.Fatalf("status line %q", line)
		}
		if got := read.Load(); got != 4097 {
			t.Errorf("the handler read %d bytes, want 4097", got)
		}
		if written >= 100*1024*len(frame) {
			t.Errorf("the whole body was written")
		}
	})
	t.Run("a Content-Length smaller than what follows: only the announced bytes are the payload", func(t *testing.T) {
		conn, err := net.Dial("tcp", strings.TrimPrefix(tn.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// 3 bytes announced, 5000 sent: the payload is "abc" (under every
		// maximum), and what follows is no request at all.
		req := "POST /v1/invoke/globex/echo/run HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 3\r\n\r\nabc" + strings.Repeat("q", 5000)
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(patience))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "echo:abc" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
	t.Run("a chunked body within the maximum is measured and admitted", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < 4; i++ {
				_, _ = pw.Write(chunk)
			}
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, tn.url+"/v1/invoke/globex/echo/run", pr)
		req.Header.Set("Authorization", "Bearer "+bobToken)
		resp, err := tn.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) != len("echo:")+4*block {
			t.Fatalf("%d, %d bytes", resp.StatusCode, len(body))
		}
	})
	tn.waitIdle()
}

func TestCrossTenantPathsCannotBeToldApart(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	// Bob (globex) names acme's paths: one deployed, one route that does
	// not exist, one service that does not exist, one tenant that does not
	// exist. Every answer is the same, headers and body.
	paths := []string{"acme/echo/run", "acme/echo/nosuch", "acme/nosuch/run", "nosuch/echo/run"}
	var first response
	for i, path := range paths {
		r := tn.invoke(path, bobToken, "x", HeaderActivationID, "same-id")
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
		r.header.Del("Date")
		if i == 0 {
			first = r
			continue
		}
		if fmt.Sprint(r.status, r.header, string(r.body)) != fmt.Sprint(first.status, first.header, string(first.body)) {
			t.Errorf("%s answered\n%d %v %s\nbut %s answered\n%d %v %s", path, r.status, r.header, r.body, paths[0], first.status, first.header, first.body)
		}
	}
	t.Run("an administrator token invokes nothing", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", adminToken, "x")
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	})
}

func TestUsageAuthorization(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	if r := tn.do(http.MethodGet, "/v1/tenants/acme/usage", aliceToken, nil); r.status != http.StatusOK {
		t.Fatalf("own tenant: %d %s", r.status, r.body)
	} else if m := r.json(t); m["tenant"] != "acme" || m["limits"].(map[string]any)["max_live_activations"] != 4.0 {
		t.Errorf("usage %s", r.body)
	}
	if r := tn.do(http.MethodGet, "/v1/tenants/acme/usage", adminToken, nil); r.status != http.StatusOK {
		t.Fatalf("administrator: %d", r.status)
	}
	if r := tn.do(http.MethodGet, "/v1/tenants/nosuch/usage", adminToken, nil); r.status != http.StatusNotFound {
		t.Fatalf("administrator, unknown tenant: %d", r.status)
	}
	wantEdgeError(t, tn.do(http.MethodGet, "/v1/tenants/acme/usage", "", nil), http.StatusUnauthorized, "Authorization")
	existing := tn.do(http.MethodGet, "/v1/tenants/acme/usage", bobToken, nil)
	missing := tn.do(http.MethodGet, "/v1/tenants/nosuch/usage", bobToken, nil)
	wantRejection(t, existing, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	existing.header.Del("Date")
	missing.header.Del("Date")
	if fmt.Sprint(existing) != fmt.Sprint(missing) {
		t.Errorf("another tenant's usage answers differ:\n%v\n%v", existing, missing)
	}
}

func TestAdministratorEndpoints(t *testing.T) {
	tn := startNode(t, nodeOptions{storeDir: t.TempDir()})
	module := []byte("\x00asm\x01\x00\x00\x00 a module")
	hexDigest := digestHex(string(module))
	deployment := func(digest string) []byte {
		return []byte(`{"tenant":"acme","service":"fresh","routes":[{"route":"run","contract":"demo.v1","function":"run","revisions":[
 {"release":{"artifact_digest":"` + digest + `","version":"1"},"weight":1,"policy":{"trust_class":"standard","backend":"wasm",
  "threading":"single","state_model":"stateless","features":[],"call_depth_limit":1,"capsule_ceiling":{},
  "deployment_ceiling":{"memory_bytes":8388608},"placement":{"architectures":[],"regions":[],"zones":[]}}}]}]}`)
	}

	for _, ep := range []struct{ method, path string }{
		{http.MethodPut, "/v1/admin/artifacts/sha256/" + hexDigest},
		{http.MethodPut, "/v1/admin/deployments/acme/fresh"},
		{http.MethodDelete, "/v1/admin/deployments/acme/echo"},
		{http.MethodGet, "/v1/admin/snapshot"},
	} {
		t.Run(ep.method+" "+ep.path+" needs an administrator", func(t *testing.T) {
			wantEdgeError(t, tn.do(ep.method, ep.path, "", module), http.StatusUnauthorized, "Authorization")
			wantEdgeError(t, tn.do(ep.method, ep.path, aliceToken, module), http.StatusForbidden, "")
		})
	}
	t.Run("a deploy naming a missing artifact is refused", func(t *testing.T) {
		r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, deployment("sha256:"+hexDigest))
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), hexDigest) {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("an artifact whose body does not match its digest is refused", func(t *testing.T) {
		r := tn.do(http.MethodPut, "/v1/admin/artifacts/sha256/"+strings.Repeat("b", 64), adminToken, module)
		if r.status != http.StatusBadRequest {
			t.Fatalf("%d %s", r.status, r.body)
		}
		wantEdgeError(t, tn.do(http.MethodPut, "/v1/admin/artifacts/sha256/ABC", adminToken, module), http.StatusBadRequest, "")
	})
	t.Run("a deploy naming an artifact that does not compile is refused", func(t *testing.T) {
		corrupt := []byte("not wasm")
		if r := tn.do(http.MethodPut, "/v1/admin/artifacts/sha256/"+digestHex(string(corrupt)), adminToken, corrupt); r.status != http.StatusOK {
			t.Fatalf("upload: %d %s", r.status, r.body)
		}
		r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, deployment("sha256:"+digestHex(string(corrupt))))
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("an invalid deployment names its JSON path", func(t *testing.T) {
		bad := []byte(strings.Replace(string(deployment(demoDigest)), `"weight":1`, `"weight":1,"bogus":2`, 1))
		r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, bad)
		var refused struct {
			Error    string
			Problems []struct{ Path, Message string }
		}
		if r.status != http.StatusBadRequest || json.Unmarshal(r.body, &refused) != nil || refused.Error != "invalid deployment" ||
			len(refused.Problems) != 1 || refused.Problems[0].Path != "$.routes[0].revisions[0].bogus" || refused.Problems[0].Message != "unknown key" {
			t.Fatalf("%d %s", r.status, r.body)
		}
		for _, body := range []string{`[]`, `{"tenant":"acme"}]`, `{} {}`, ``} {
			if r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, []byte(body)); r.status != http.StatusBadRequest {
				t.Errorf("%q: %d %s", body, r.status, r.body)
			}
		}
		if r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/other", adminToken, deployment(demoDigest)); r.status != http.StatusBadRequest {
			t.Errorf("path and body disagree: %d %s", r.status, r.body)
		}
	})
	var generation float64
	t.Run("upload, deploy, invoke, delete", func(t *testing.T) {
		if r := tn.do(http.MethodPut, "/v1/admin/artifacts/sha256/"+hexDigest, adminToken, module); r.status != http.StatusOK {
			t.Fatalf("upload: %d %s", r.status, r.body)
		}
		r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, deployment("sha256:"+hexDigest))
		if r.status != http.StatusOK {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		generation = r.json(t)["generation"].(float64)
		if !tn.guests.isDeployed("acme/fresh") {
			t.Error("the runtime was not given the deployment")
		}
		if r := tn.invoke("acme/fresh/run", aliceToken, "hi"); r.status != http.StatusOK || string(r.body) != "echo:hi" {
			t.Fatalf("invoke: %d %s", r.status, r.body)
		}
		snap := tn.do(http.MethodGet, "/v1/admin/snapshot", adminToken, nil)
		if snap.status != http.StatusOK || !strings.Contains(string(snap.body), `"service":"fresh"`) {
			t.Fatalf("snapshot: %d %s", snap.status, snap.body)
		}
		r = tn.do(http.MethodDelete, "/v1/admin/deployments/acme/fresh", adminToken, nil)
		if r.status != http.StatusOK || r.json(t)["generation"].(float64) <= generation {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
		if r := tn.invoke("acme/fresh/run", aliceToken, "hi"); r.status != http.StatusNotFound {
			t.Fatalf("after delete: %d", r.status)
		}
		if tn.guests.isDeployed("acme/fresh") {
			t.Error("the runtime still holds the deleted deployment")
		}
		if r := tn.do(http.MethodDelete, "/v1/admin/deployments/acme/fresh", adminToken, nil); r.status != http.StatusNotFound {
			t.Fatalf("second delete: %d", r.status)
		}
	})
	t.Run("deployments are persisted through the store", func(t *testing.T) {
		if r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, deployment("sha256:"+hexDigest)); r.status != http.StatusOK {
			t.Fatalf("deploy: %d %s", r.status, r.body)
		}
		dir := tn.node.cfg.StoreDir
		tn.shutdown()
		guests := newFakeGuestsFrom(tn.guests)
		n, err := New(testConfig(t, guests, nodeOptions{storeDir: dir}))
		if err != nil {
			t.Fatal(err)
		}
		again := serveNode(t, n, guests)
		if r := again.invoke("acme/fresh/run", aliceToken, "back"); r.status != http.StatusOK || string(r.body) != "echo:back" {
			t.Fatalf("after restart: %d %s", r.status, r.body)
		}
	})
}

// newFakeGuestsFrom is a fresh runtime holding g's artifacts, as a
// restarted node finds them in its artifact directory.
func newFakeGuestsFrom(g *fakeGuests) *fakeGuests {
	fresh := newFakeGuests()
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.artifacts {
		fresh.artifacts[k] = v
	}
	return fresh
}

func (g *fakeGuests) isDeployed(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deployed[key] != nil
}

func TestTwoNodesOnOneStore(t *testing.T) {
	dir := t.TempDir()
	first := startNode(t, nodeOptions{storeDir: dir})
	_, err := New(testConfig(t, newFakeGuests(), nodeOptions{storeDir: dir}))
	if !errors.Is(err, catalog.ErrStoreInUse) {
		t.Fatalf("second node: %v, want catalog.ErrStoreInUse", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("the error does not name the store: %v", err)
	}
	// Shutdown closes the store: the next node opens it.
	first.shutdown()
	guests := newFakeGuests()
	second, err := New(testConfig(t, guests, nodeOptions{storeDir: dir}))
	if err != nil {
		t.Fatalf("after the first node shut down: %v", err)
	}
	serveNode(t, second, guests)
}

func TestConcurrentInvocationsBeyondTheTenantLimit(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	// acme may hold 4 live activations. Eight hold their cells: four are
	// admitted and four get 429; once released the ledger is empty again.
	const callers = 8
	var wg sync.WaitGroup
	answers := make(chan response, callers)
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); answers <- tn.invoke("acme/echo/run", aliceToken, "hold") }()
	}
	for i := 0; i < 4; i++ {
		select {
		case <-tn.guests.started:
		case <-time.After(patience):
			t.Fatal("the admitted guests did not start")
		}
	}
	rejected := 0
	for rejected < callers-4 {
		select {
		case r := <-answers:
			wantRejection(t, r, http.StatusTooManyRequests, "resource-exhausted", "tenant", "live-activations", "capacity-exhausted", true, "1")
			rejected++
		case <-time.After(patience):
			t.Fatal("the callers beyond the limit were not answered")
		}
	}
	if snap, _ := tn.node.Provider().TenantSnapshot("acme"); snap.Live != 4 {
		t.Errorf("acme holds %d live, want 4", snap.Live)
	}
	tn.closeHold()
	wg.Wait()
	close(answers)
	for r := range answers {
		if r.status != http.StatusOK {
			t.Errorf("an admitted caller: %d %s", r.status, r.body)
		}
	}
	tn.waitIdle()
	snap, _ := tn.node.Provider().TenantSnapshot("acme")
	if snap.Live != 0 || snap.Queued != 0 || snap.CPUFuel != 0 || snap.MemoryBytes != 0 {
		t.Errorf("the ledger is not back to zero: %+v", snap)
	}
}

func TestGracefulShutdownReleasesEveryPermit(t *testing.T) {
	guests := newFakeGuests()
	cfg := testConfig(t, guests, nodeOptions{})
	cfg.ShutdownGrace = 300 * time.Millisecond
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn := serveNode(t, n, guests)
	answers := make(chan response, 3)
	for i := 0; i < 3; i++ {
		go func() { answers <- tn.invoke("acme/echo/run", aliceToken, "block") }()
	}
	// block guests signal nothing; wait for their reservations.
	deadline := time.Now().Add(patience)
	for n.Provider().LiveReservations() < 3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	if live := n.Provider().LiveReservations(); live != 3 {
		t.Fatalf("%d live before shutdown", live)
	}
	start := time.Now()
	tn.shutdown() // fails the test if a reservation is still live
	// Grace (300 ms) and the answers after the interrupt (2 s): well under
	// patience/2 even on a loaded machine; a shutdown that waited for the
	// blocked guests would take patience.
	if took := time.Since(start); took > patience/2 {
		t.Errorf("shutdown took %v", took)
	}
	for i := 0; i < 3; i++ {
		if r := <-answers; r.status != http.StatusServiceUnavailable || r.header.Get(HeaderOutcome) != OutcomeCanceled {
			t.Errorf("an interrupted activation: %d %v %s", r.status, r.header, r.body)
		}
	}
	if live := n.Provider().LiveReservations(); live != 0 {
		t.Errorf("%d reservations live after shutdown", live)
	}
}
