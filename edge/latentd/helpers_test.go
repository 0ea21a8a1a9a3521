package latentd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// The test tokens and their principals (see testTokens).
const (
	aliceToken = "alice-secret"
	bobToken   = "bob-secret"
	adminToken = "admin-secret"
	// strayToken belongs to a tenant the policy does not configure.
	strayToken = "stray-secret"
	// revokedToken is acme's, for a subject the policy no longer lists.
	revokedToken = "revoked-secret"
	// metricsToken may read every series of /metrics, and nothing else.
	metricsToken = "metrics-secret"
)

// patience is how long a test waits for what must happen (a guest that
// starts, a reservation that drains, an answer) before it calls it a
// hang. The tests run under -race beside other packages' tests on a
// two-core machine that may be fully loaded, where a step that takes
// milliseconds alone can take seconds; patience only bounds a hang, so
// it costs nothing when the test passes.
const patience = 2 * time.Minute

// demoArtifact is the test artifact the catalog names (sha256:aaaa...):
// the fake runtime knows it without an upload.
var demoDigest = "sha256:" + strings.Repeat("a", 64)

func digestHex(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func testTokens(t testing.TB) *Tokens {
	t.Helper()
	doc := `{"tokens":[
 {"sha256":"` + digestHex(aliceToken) + `","kind":"user","subject":"alice","tenant":"acme","service":""},
 {"sha256":"` + digestHex(bobToken) + `","kind":"user","subject":"bob","tenant":"globex"},
 {"sha256":"` + digestHex(strayToken) + `","kind":"user","subject":"eve","tenant":"nowhere"},
 {"sha256":"` + digestHex(revokedToken) + `","kind":"user","subject":"mallory","tenant":"acme"},
 {"sha256":"` + digestHex(metricsToken) + `","metrics":true},
 {"sha256":"` + digestHex(adminToken) + `","admin":true}]}`
	tok, err := DecodeTokens([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// fakeGuests is a Guests over the synthetic backend: artifacts are kept in
// memory, verified against their digest, and "compile" when they start
// with the Wasm magic. Guests behave by their input (see plan). Like the
// real runtime, a guest whose release its pair no longer deploys, and no
// hold keeps, is a platform failure.
type fakeGuests struct {
	backend *synthetic.Backend
	hold    chan struct{} // closed to release "hold" guests
	started chan struct{} // one send per "hold" guest that started

	mu        sync.Mutex
	artifacts map[string][]byte          // guarded by mu
	deployed  map[string]map[string]bool // tenant/service to release IDs; guarded by mu
	holds     map[string]int             // tenant/service/release to holds; guarded by mu
	closed    bool                       // guarded by mu
	// preparing, when set, is called by Prepare once the artifacts are
	// checked, as the compile: its error is Prepare's. Guarded by mu.
	preparing func(ctx context.Context) error
}

func newFakeGuests() *fakeGuests {
	g := &fakeGuests{hold: make(chan struct{}), started: make(chan struct{}, 256),
		artifacts: map[string][]byte{demoDigest: []byte("\x00asm\x01\x00\x00\x00")}, deployed: map[string]map[string]bool{},
		holds: map[string]int{}}
	g.backend = synthetic.New(g.plan)
	return g
}

func (g *fakeGuests) plan(guest *runner.Guest) synthetic.Behavior {
	if !g.runnable(guest.Revision.Tenant+"/"+guest.Revision.Service, guest.Revision.Release) {
		return synthetic.Behavior{Exit: runner.ExitPlatformFailure}
	}
	switch string(guest.Input) {
	case "declared":
		return synthetic.Behavior{Exit: runner.ExitDeclaredError, Output: []byte("declared: no")}
	case "trap":
		return synthetic.Behavior{Exit: runner.ExitTrapped}
	case "block":
		return synthetic.Behavior{Block: true}
	case "fuel":
		return synthetic.Behavior{Fuel: 1 << 62}
	case "memory":
		return synthetic.Behavior{Memory: 1 << 62}
	case "platform":
		return synthetic.Behavior{Exit: runner.ExitPlatformFailure}
	case "hold":
		return synthetic.Behavior{Hold: g.hold, Started: func() { g.started <- struct{}{} }}
	case "brief":
		return synthetic.Behavior{Duration: 2 * time.Millisecond}
	}
	return synthetic.Behavior{Output: append([]byte("echo:"), guest.Input...)}
}

func (g *fakeGuests) runnable(pair, release string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deployed[pair][release] || g.holds[pair+"/"+release] > 0
}

func (g *fakeGuests) Backends() map[string]runner.Backend {
	return map[string]runner.Backend{"wasm": g.backend}
}

func (g *fakeGuests) Prepare(ctx context.Context, d catalog.Deployment) (Prepared, error) {
	g.mu.Lock()
	releases := map[string]bool{}
	for _, route := range d.Routes {
		for _, rev := range route.Revisions {
			digest := rev.Release.ArtifactDigest
			content, ok := g.artifacts[digest]
			if !ok {
				g.mu.Unlock()
				return nil, errors.New("artifact " + digest + ": missing")
			}
			if !bytes.HasPrefix(content, []byte("\x00asm")) {
				g.mu.Unlock()
				return nil, errors.New("artifact " + digest + ": not a WebAssembly module")
			}
			releases[catalog.ReleaseID(rev.Release)] = true
		}
	}
	preparing := g.preparing
	g.mu.Unlock()
	if preparing != nil {
		if err := preparing(ctx); err != nil {
			return nil, err
		}
	}
	return &fakePrepared{g: g, pair: d.Tenant + "/" + d.Service, releases: releases}, nil
}

// fakePrepared is a fakeGuests deployment made ready; releases nil is
// "no deployment".
type fakePrepared struct {
	g        *fakeGuests
	pair     string
	releases map[string]bool
	spent    bool
}

func (p *fakePrepared) Commit() (Prepared, error) {
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	if p.spent {
		panic("fakePrepared committed twice")
	}
	if p.g.closed {
		return nil, errors.New("closed")
	}
	old := p.g.deployed[p.pair]
	if p.releases == nil {
		delete(p.g.deployed, p.pair)
	} else {
		p.g.deployed[p.pair] = p.releases
	}
	p.spent = true
	return &fakePrepared{g: p.g, pair: p.pair, releases: old}, nil
}

func (p *fakePrepared) Discard() { p.spent = true }

func (g *fakeGuests) Undeploy(tenant, service string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.deployed, tenant+"/"+service)
}

func (g *fakeGuests) Hold(tenant, service, release string) (func(), bool) {
	key := tenant + "/" + service + "/" + release
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.deployed[tenant+"/"+service][release] && g.holds[key] == 0 {
		return nil, false
	}
	g.holds[key]++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.holds[key]--; g.holds[key] == 0 {
			delete(g.holds, key)
		}
	}, true
}

func (g *fakeGuests) PutArtifact(hexDigest string, r io.Reader) error {
	content, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return err
	}
	if len(content) > 1<<20 {
		return errors.New("too large")
	}
	if digestHex(string(content)) != hexDigest {
		return errors.New("content does not match the digest")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.artifacts["sha256:"+hexDigest] = content
	return nil
}

func (g *fakeGuests) Close(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return errors.New("closed twice")
	}
	g.closed = true
	return nil
}

// nodeOptions adjust a test node's configuration.
type nodeOptions struct {
	load     string // fixture under testdata/load; "" is calm
	storeDir string
	mutate   func(*Config)
	policy   func(*policy.NodeAdmissionPolicy)
}

// testNode is a node serving on a real loopback listener.
type testNode struct {
	t      testing.TB
	node   *Node
	guests *fakeGuests
	url    string
	client *http.Client
	served chan error
}

func loadFiles(name string) loadsampler.Files {
	if name == "" {
		name = "calm"
	}
	dir := filepath.Join("testdata", "load", name)
	f := loadsampler.Files{Proc: filepath.Join(dir, "proc")}
	if _, err := os.Stat(filepath.Join(dir, "cgroup")); err == nil {
		f.Cgroup = filepath.Join(dir, "cgroup")
	}
	return f
}

func testPolicy(t testing.TB) *policy.NodeAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile("testdata/policy.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func testDeployments(t testing.TB) []catalog.Deployment {
	t.Helper()
	data, err := os.ReadFile("testdata/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := catalog.DecodeCatalogFile(data, true)
	if err != nil {
		t.Fatal(err)
	}
	return f.Deployments
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testConfig(t testing.TB, guests *fakeGuests, o nodeOptions) Config {
	p := testPolicy(t)
	if o.policy != nil {
		o.policy(p)
	}
	cfg := Config{Policy: p, Tokens: testTokens(t), Guests: guests, Load: loadFiles(o.load), Logger: quietLogger(),
		ShutdownGrace: 2 * time.Second, StoreDir: o.storeDir}
	if o.storeDir == "" {
		cfg.Deployments = testDeployments(t)
	}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	return cfg
}

// startNode builds a node and serves it on 127.0.0.1:0; the test's cleanup
// shuts it down and fails the test if shutdown reports a problem.
func startNode(t testing.TB, o nodeOptions) *testNode {
	t.Helper()
	guests := newFakeGuests()
	n, err := New(testConfig(t, guests, o))
	if err != nil {
		t.Fatal(err)
	}
	return serveNode(t, n, guests)
}

func serveNode(t testing.TB, n *Node, guests *fakeGuests) *testNode {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNode{t: t, node: n, guests: guests, url: "http://" + l.Addr().String(), served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: patience}}
	go func() { tn.served <- n.Serve(l) }()
	t.Cleanup(func() { tn.shutdown() })
	return tn
}

// shutdown ends the node once; later calls do nothing.
func (tn *testNode) shutdown() {
	tn.t.Helper()
	tn.closeHold()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := tn.node.Shutdown(ctx); err != nil {
		tn.t.Errorf("shutdown: %v", err)
	}
	if tn.served != nil {
		if err := <-tn.served; !errors.Is(err, http.ErrServerClosed) {
			tn.t.Errorf("serve: %v", err)
		}
		tn.served = nil
	}
	tn.client.CloseIdleConnections()
}

func (tn *testNode) closeHold() {
	select {
	case <-tn.guests.hold:
	default:
		close(tn.guests.hold)
	}
}

// response is everything a test compares about an answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", r.body, err)
	}
	return m
}

// do sends one request; headers are name, value pairs.
func (tn *testNode) do(method, path, token string, body []byte, headers ...string) response {
	tn.t.Helper()
	return send(tn.t, tn.client, tn.url, method, path, token, body, headers...)
}

// send sends one request to base+path and reads the whole answer. It
// reports failures with Errorf, not Fatal: callers run it on goroutines
// of their own.
func send(t testing.TB, client *http.Client, base, method, path, token string, body []byte, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("%s %s: reading the body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (tn *testNode) invoke(path, token string, body string, headers ...string) response {
	tn.t.Helper()
	return tn.do(http.MethodPost, "/v1/invoke/"+path, token, []byte(body), headers...)
}

// waitIdle waits until the node holds no reservation and runs nothing.
func (tn *testNode) waitIdle() {
	tn.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		c := tn.node.Pipeline().Counters()
		if tn.node.Provider().LiveReservations() == 0 && len(c.Residue()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tn.t.Fatalf("still held: %v", c.Residue())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
