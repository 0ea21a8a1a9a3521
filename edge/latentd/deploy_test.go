package latentd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/node/runner"
)

// These tests deploy and delete over real loopback HTTP while other
// requests run: the runtime and the catalog must agree whatever the
// interleaving (issue 23, item 3), an admitted activation runs the
// release it was admitted for across a redeploy (item 4), a deploy whose
// client went away changes nothing (item 6), and a deploy is answered
// whatever its compile takes against the server's timeouts (issue 29).

// deployTestTimeout bounds a deploy's round trip in these tests: the Go
// guest compiles for tens of seconds under the race detector on a loaded
// two-core machine, so this is only a backstop against a hang.
const deployTestTimeout = 5 * time.Minute

// okGuest is a hand-assembled WASI command whose _start returns at once:
// exit 0, no output. It compiles in a moment.
var okGuest = func() []byte {
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	code := []byte{0x00, 0x0b} // no locals, end
	exports := []byte{0x02}
	exports = append(append(exports, wasmName("_start")...), 0x00, 0x00)
	exports = append(append(exports, wasmName("memory")...), 0x02, 0x00)
	for _, s := range [][]byte{
		wasmSection(1, 0x01, 0x60, 0x00, 0x00), // one type: () -> ()
		wasmSection(3, 0x01, 0x00),             // one function of type 0
		wasmSection(5, 0x01, 0x00, 0x01),       // one memory of one page, no maximum
		wasmSection(7, exports...),
		wasmSection(10, append([]byte{0x01, byte(len(code))}, code...)...),
	} {
		m = append(m, s...)
	}
	return m
}()

// versionedDeployment is a deployment of tenant/service whose one route,
// "run", runs digest as release version; its memory ceiling (32 MiB)
// puts every activation on the "small" cell class (parallelism 1), and
// its wall time may reach wallMs.
func versionedDeployment(tenant, service, digest, version string, wallMs int) []byte {
	return []byte(`{"tenant":"` + tenant + `","service":"` + service + `","routes":[{"route":"run","contract":"text.v1","function":"run","revisions":[{
  "release":{"artifact_digest":"` + digest + `","version":"` + version + `"},"weight":1,
  "policy":{"trust_class":"standard","backend":"wasm","threading":"single","state_model":"stateless","features":[],
   "call_depth_limit":4,"capsule_ceiling":{},"deployment_ceiling":{"memory_bytes":33554432,"wall_time_ms":` + fmt.Sprint(wallMs) + `},
   "placement":{"architectures":[],"regions":[],"zones":[]}}}]}]}`)
}

// wasmNodeOptions adjust startWasmNode's node.
type wasmNodeOptions struct {
	// wrap replaces the node's Guests with one built over the real ones.
	wrap func(*WasmGuests) Guests
	// mutate adjusts the configuration before New.
	mutate func(*Config)
	// wallTime raises the node's wall-time ceiling.
	wallTime time.Duration
}

// startWasmNode is a node on WasmGuests with an empty catalog, serving on
// 127.0.0.1:0 with its own server; its client waits deployTestTimeout.
func startWasmNode(t *testing.T, o wasmNodeOptions) *realGuestNode {
	t.Helper()
	p := testPolicy(t)
	p.Node.BudgetCeiling.CPUFuel = realGuestFuel
	p.Node.BudgetCeiling.WallTime = realGuestWallTime
	if o.wallTime > 0 {
		p.Node.BudgetCeiling.WallTime = o.wallTime
	}
	wasm, err := NewWasmGuests(context.Background(), WasmConfig{ArtifactsDir: filepath.Join(t.TempDir(), "artifacts"),
		MaxResponseBytes: realGuestMaxResponse, MaxMemoryBytes: p.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	var guests Guests = wasm
	if o.wrap != nil {
		guests = o.wrap(wasm)
	}
	cfg := Config{Policy: p, Tokens: testTokens(t), Guests: guests, Load: loadFiles(""), Logger: quietLogger(),
		ShutdownGrace: 2 * time.Second}
	if o.mutate != nil {
		o.mutate(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		_ = wasm.Close(context.Background())
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rn := &realGuestNode{t: t, node: n, url: "http://" + l.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: deployTestTimeout}}
	served := make(chan error, 1)
	go func() { served <- n.Serve(l) }()
	t.Cleanup(func() {
		rn.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return rn
}

// plainServer serves h on another loopback listener without timeouts,
// for the requests of a test whose node's own server has small ones; it
// returns the base URL.
func plainServer(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return "http://" + l.Addr().String()
}

// Issue 23, item 3: PUT and DELETE of the same pairs, racing over
// loopback. Each answers 200 (DELETE also 404), and after every round
// each pair the catalog holds invokes (200, never a 500 from a runtime
// that disagrees) and each pair it does not hold answers 404.
func TestDeployAndDeleteRaceOverLoopback(t *testing.T) {
	rn := startWasmNode(t, wasmNodeOptions{})
	digest := rn.putArtifact(okGuest)
	services := []string{"one", "two"}
	const rounds = 30
	for round := range rounds {
		var wg sync.WaitGroup
		for _, svc := range services {
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					version := fmt.Sprintf("1.%d.%d", round, i)
					r := send(t, rn.client, rn.url, http.MethodPut, "/v1/admin/deployments/acme/"+svc, adminToken,
						versionedDeployment("acme", svc, digest, version, 5000))
					if r.status != http.StatusOK {
						t.Errorf("round %d: PUT acme/%s: %d %s", round, svc, r.status, r.body)
					}
				}()
			}
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := send(t, rn.client, rn.url, http.MethodDelete, "/v1/admin/deployments/acme/"+svc, adminToken, nil)
					if r.status != http.StatusOK && r.status != http.StatusNotFound {
						t.Errorf("round %d: DELETE acme/%s: %d %s", round, svc, r.status, r.body)
					}
				}()
			}
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		pin := rn.node.catalog.Pin()
		for _, svc := range services {
			_, _, deployed := pin.Deployment("acme", svc)
			r := rn.do(http.MethodPost, "/v1/invoke/acme/"+svc+"/run", aliceToken, nil)
			switch {
			case deployed && r.status != http.StatusOK:
				t.Fatalf("round %d: acme/%s is in the catalog (generation %d) and answers %d %s=%q %s",
					round, svc, pin.Generation(), r.status, HeaderOutcome, r.header.Get(HeaderOutcome), r.body)
			case !deployed && r.status != http.StatusNotFound:
				t.Fatalf("round %d: acme/%s is not in the catalog and answers %d %s", round, svc, r.status, r.body)
			}
		}
	}
	rn.ledgerAtZero()
}

// gatedGuests are WasmGuests whose backend keeps an activation with the
// input "gate" on its cell, before the real backend looks its release
// up, until gate is closed.
type gatedGuests struct {
	*WasmGuests
	gate    chan struct{}
	entered chan struct{}
}

func (g *gatedGuests) Backends() map[string]runner.Backend {
	return map[string]runner.Backend{WasmBackend: gatedBackend{g.WasmGuests.Backends()[WasmBackend], g}}
}

type gatedBackend struct {
	inner runner.Backend
	g     *gatedGuests
}

func (b gatedBackend) Run(ctx context.Context, guest *runner.Guest) runner.Exit {
	if string(guest.Input) == "gate" {
		b.g.entered <- struct{}{}
		<-b.g.gate
	}
	return b.inner.Run(ctx, guest)
}

// Issue 23, item 4: one activation holds the only "small" cell and
// another waits in the queue for it, both admitted for release 1.0.0;
// then the pair is redeployed as 2.0.0 (or deleted) and the cell frees.
// Both run the release they were admitted for (200), never a 500; after
// a redeploy the next invocation runs 2.0.0, after a delete it is 404.
func TestRedeployKeepsTheReleaseOfAdmittedActivations(t *testing.T) {
	for _, change := range []string{"redeploy", "delete"} {
		t.Run(change, func(t *testing.T) {
			gated := &gatedGuests{gate: make(chan struct{}), entered: make(chan struct{}, 4)}
			rn := startWasmNode(t, wasmNodeOptions{
				wrap:     func(w *WasmGuests) Guests { gated.WasmGuests = w; return gated },
				wallTime: time.Minute, // the queued activation's deadline outlives a slow redeploy
			})
			closeGate := sync.OnceFunc(func() { close(gated.gate) })
			t.Cleanup(closeGate)
			digest := rn.putArtifact(okGuest)
			if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/svc", adminToken, versionedDeployment("acme", "svc", digest, "1.0.0", 60000)); r.status != http.StatusOK {
				t.Fatalf("deploy 1.0.0: %d %s", r.status, r.body)
			}
			answers := make(chan response, 2)
			go func() {
				answers <- send(t, rn.client, rn.url, http.MethodPost, "/v1/invoke/acme/svc/run", aliceToken, []byte("gate"))
			}()
			select {
			case <-gated.entered:
			case <-time.After(patience):
				t.Fatal("the gated activation never reached its cell")
			}
			go func() {
				answers <- send(t, rn.client, rn.url, http.MethodPost, "/v1/invoke/acme/svc/run", aliceToken, []byte("queued"))
			}()
			for deadline := time.Now().Add(patience); rn.node.Pipeline().Scheduler().Queued("batch") != 1; {
				if time.Now().After(deadline) {
					t.Fatal("the second activation was never queued")
				}
				time.Sleep(5 * time.Millisecond)
			}
			after := http.StatusOK
			if change == "redeploy" {
				if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/svc", adminToken, versionedDeployment("acme", "svc", digest, "2.0.0", 60000)); r.status != http.StatusOK {
					t.Fatalf("redeploy 2.0.0: %d %s", r.status, r.body)
				}
			} else {
				if r := rn.do(http.MethodDelete, "/v1/admin/deployments/acme/svc", adminToken, nil); r.status != http.StatusOK {
					t.Fatalf("delete: %d %s", r.status, r.body)
				}
				after = http.StatusNotFound
			}
			if q := rn.node.Pipeline().Scheduler().Queued("batch"); q != 1 {
				t.Fatalf("%d queued after the %s, want the one admitted before it", q, change)
			}
			closeGate()
			for range 2 {
				r := <-answers
				if r.status != http.StatusOK || r.header.Get(HeaderOutcome) != OutcomeSuccess {
					t.Errorf("an activation admitted before the %s: %d %s=%q %s", change, r.status, HeaderOutcome, r.header.Get(HeaderOutcome), r.body)
				}
			}
			if r := rn.do(http.MethodPost, "/v1/invoke/acme/svc/run", aliceToken, nil); r.status != after {
				t.Errorf("after the %s: %d %s, want %d", change, r.status, r.body, after)
			}
			rn.ledgerAtZero()
		})
	}
}

// Issue 23, item 6: a deploy whose client goes away while it compiles is
// abandoned, even when the compile does not stop (the hook ignores its
// context and succeeds once the server saw the client go): the catalog's
// generation and deployments, and the runtime, stay as they were.
func TestDeployWhoseClientWentAwayChangesNothing(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	compiling := make(chan struct{}, 1)
	ended := make(chan struct{}, 1)
	tn.guests.mu.Lock()
	tn.guests.preparing = func(ctx context.Context) error {
		compiling <- struct{}{}
		<-ctx.Done() // the server saw the client go
		ended <- struct{}{}
		return nil // and the compile still succeeds
	}
	tn.guests.mu.Unlock()
	before := tn.node.catalog.Pin()
	echoBefore, _, _ := before.Deployment("acme", "echo")
	for _, svc := range []string{"fresh", "echo"} {
		t.Run("acme/"+svc, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, tn.url+"/v1/admin/deployments/acme/"+svc,
				bytes.NewReader(versionedDeployment("acme", svc, demoDigest, "9.9.9", 5000)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+adminToken)
			failed := make(chan error, 1)
			go func() {
				resp, err := tn.client.Do(req)
				if err == nil {
					resp.Body.Close()
					err = fmt.Errorf("answered %d", resp.StatusCode)
				}
				failed <- err
			}()
			<-compiling
			cancel()
			if err := <-failed; !errors.Is(err, context.Canceled) {
				t.Fatalf("the client: %v, want its own cancellation", err)
			}
			<-ended
			// The handler goes on after the hook; nothing may change then.
			for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if after := tn.node.catalog.Pin(); after.Generation() != before.Generation() {
					t.Fatalf("generation %d after the abandoned deploy, was %d", after.Generation(), before.Generation())
				}
			}
		})
	}
	after := tn.node.catalog.Pin()
	if _, _, ok := after.Deployment("acme", "fresh"); ok || tn.guests.isDeployed("acme/fresh") {
		t.Error("the abandoned deploy of acme/fresh took effect")
	}
	echo, _, _ := after.Deployment("acme", "echo")
	if catalog.ReleaseID(echo.Routes[0].Revisions[0].Release) != catalog.ReleaseID(echoBefore.Routes[0].Revisions[0].Release) {
		t.Error("the abandoned redeploy of acme/echo took effect")
	}
	if r := tn.invoke("acme/echo/run", aliceToken, "still"); r.status != http.StatusOK || string(r.body) != "echo:still" {
		t.Errorf("acme/echo after the abandoned redeploy: %d %s", r.status, r.body)
	}
}

// Issue 29: the server's WriteTimeout (500 ms) and ReadTimeout (2 s) are
// both shorter than the deploy's compile (the hook takes 3 s). The
// deploy is still answered, truly: 200 with the generation, and the
// deployment invokes. (The write deadline would cut the answer. The read
// deadline must not pass for a client that went away, which would
// abandon the deploy: net/http lifts it once the body is read to its
// end, and this holds it to that.)
func TestDeployOutlastsTheServerTimeouts(t *testing.T) {
	guests := newFakeGuests()
	cfg := testConfig(t, guests, nodeOptions{})
	cfg.WriteTimeout, cfg.ReadTimeout = 500*time.Millisecond, 2*time.Second
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tn := serveNode(t, n, guests)
	tn.client.Timeout = deployTestTimeout
	const compile = 3 * time.Second
	guests.mu.Lock()
	guests.preparing = func(ctx context.Context) error {
		select {
		case <-time.After(compile):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	guests.mu.Unlock()
	start := time.Now()
	r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/fresh", adminToken, versionedDeployment("acme", "fresh", demoDigest, "1.0.0", 5000))
	if r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	if took := time.Since(start); took < compile {
		t.Fatalf("answered after %v, before the compile ended", took)
	}
	if gen := r.json(t)["generation"]; gen != float64(n.catalog.Pin().Generation()) {
		t.Errorf("answered generation %v, the catalog is at %d", gen, n.catalog.Pin().Generation())
	}
	// The invocation goes through a server without timeouts: the node's
	// own 500 ms would be a test of the machine.
	other := plainServer(t, n.Handler())
	if r := send(t, tn.client, other, http.MethodPost, "/v1/invoke/acme/fresh/run", aliceToken, []byte("hi")); r.status != http.StatusOK || string(r.body) != "echo:hi" {
		t.Errorf("the deployment after its deploy: %d %s", r.status, r.body)
	}
}

// Issue 29, with the real runtime: the node's WriteTimeout (500 ms) is
// shorter than wazero's compile of the Go guest (seconds; tens of seconds
// under -race on a loaded machine), and long enough to write the answer
// on a loaded machine once it starts (10 ms was not, under -race). The
// upload and the deploy are answered 200 over that server, and the guest
// then runs.
func TestDeployOfTheGoGuestOutlastsTheWriteTimeout(t *testing.T) {
	module := uppercaseGuest(t)
	rn := startWasmNode(t, wasmNodeOptions{mutate: func(c *Config) { c.WriteTimeout = 500 * time.Millisecond }})
	digest := rn.putArtifact(module)
	start := time.Now()
	doc := `{"tenant":"acme","service":"guests","routes":[` + realGuestRoute("upper", digest) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/guests", adminToken, []byte(doc)); r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	t.Logf("the deploy (wazero compiles the Go guest) answered after %v; WriteTimeout is 500ms", time.Since(start))
	// Everything else goes through a server without timeouts: the node's
	// own 500 ms would be a test of the machine.
	rn.url = plainServer(t, rn.node.Handler())
	r := send(t, rn.client, rn.url, http.MethodPost, "/v1/invoke/acme/guests/upper", aliceToken, []byte("compiled"), HeaderMemoryBytes, "33554432")
	if r.status != http.StatusOK || string(r.body) != "COMPILED" {
		t.Fatalf("the guest after its deploy: %d %s=%q %s", r.status, HeaderOutcome, r.header.Get(HeaderOutcome), r.body)
	}
	rn.ledgerAtZero()
}

// A deploy the catalog refuses after the runtime switched (here: over
// the catalog's capacity, 409) puts the runtime back: the pair runs the
// release the catalog still names, never a 500.
func TestADeployTheCatalogRefusesLeavesTheRuntimeAsItWas(t *testing.T) {
	revisions, echo := 0, 0
	for _, d := range testDeployments(t) {
		for _, r := range d.Routes {
			revisions += len(r.Revisions)
			if d.Tenant == "acme" && d.Service == "echo" {
				echo += len(r.Revisions)
			}
		}
	}
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.Capacity = catalog.Capacity{MaxRevisions: uint64(revisions + 1), MaxPolicyBytes: 1 << 30}
	}})
	// acme/echo again, with two more revisions than it has: within the
	// capacity alone (the body's check), over it with the others.
	one := `{"release":{"artifact_digest":"` + demoDigest + `","version":"VERSION"},"weight":1,
   "policy":{"trust_class":"standard","backend":"wasm","threading":"single","state_model":"stateless","features":[],
   "call_depth_limit":4,"capsule_ceiling":{},"deployment_ceiling":{"memory_bytes":8388608},
   "placement":{"architectures":[],"regions":[],"zones":[]}}}`
	var revs []string
	for i := range echo + 2 {
		revs = append(revs, strings.Replace(one, "VERSION", fmt.Sprintf("8.0.%d", i), 1))
	}
	doc := `{"tenant":"acme","service":"echo","routes":[{"route":"run","contract":"demo.v1","function":"run","revisions":[` +
		strings.Join(revs, ",") + `]}]}`
	before := tn.node.catalog.Pin().Generation()
	if r := tn.do(http.MethodPut, "/v1/admin/deployments/acme/echo", adminToken, []byte(doc)); r.status != http.StatusConflict {
		t.Fatalf("a deploy over the catalog's capacity: %d %s", r.status, r.body)
	}
	if after := tn.node.catalog.Pin().Generation(); after != before {
		t.Fatalf("generation %d after a refused deploy, was %d", after, before)
	}
	for i := range 8 {
		if r := tn.invoke("acme/echo/run", aliceToken, "still", HeaderRoutingKey, fmt.Sprint(i)); r.status != http.StatusOK || string(r.body) != "echo:still" {
			t.Fatalf("acme/echo after the refused deploy: %d %s=%q %s", r.status, HeaderOutcome, r.header.Get(HeaderOutcome), r.body)
		}
	}
}
