package latentd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/edge/internal/guesttest"
)

// These tests run latentd over real loopback HTTP with the real guest
// runtime (WasmGuests: edge/guest's store and wazero backend), deploying
// through the admin API a Go guest built from source with GOOS=wasip1
// GOARCH=wasm (edge/guest's test guest, ../guest/testdata/guests/uppercase)
// and a hand-assembled module that traps.

// realGuestMaxResponse is the response bound of the real-guest node: small,
// so that an echo can reach it exactly and pass it by one byte.
const realGuestMaxResponse = 1024

// realGuestFuel is the node's fuel ceiling here: 30 s of execution.
const realGuestFuel = 30_000_000_000

// realGuestWallTime is the node's wall-time ceiling here, and the
// deployments' (realGuestRoute).
const realGuestWallTime = time.Minute

// realGuestBuild is the Go guest, built once per test binary.
var realGuestBuild struct {
	once   sync.Once
	module []byte
	took   time.Duration
	err    error
}

// uppercaseGuest builds edge/guest's test guest with guesttest.BuildGoGuest
// (the standard toolchain, GOOS=wasip1 GOARCH=wasm) the first time it is
// asked for, and returns its bytes.
func uppercaseGuest(t *testing.T) []byte {
	t.Helper()
	b := &realGuestBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "latentd-guest-")
		if err != nil {
			b.err = err
			return
		}
		defer os.RemoveAll(dir)
		start := time.Now()
		out := filepath.Join(dir, "uppercase.wasm")
		if err := guesttest.BuildGoGuest(context.Background(), filepath.Join("..", "guest", "testdata", "guests", "uppercase"), out); err != nil {
			var be *guesttest.BuildError
			if errors.As(err, &be) {
				err = fmt.Errorf("%w\n%s", err, be.Output)
			}
			b.err = err
			return
		}
		b.took = time.Since(start)
		b.module, b.err = os.ReadFile(out)
	})
	if b.err != nil {
		t.Fatalf("building the Go guest: %v", b.err)
	}
	return b.module
}

// The hand-assembled trap module, built as edge/guest's wasm_test.go
// builds its trapModule: a WASI command whose _start executes
// unreachable, with one exported page of memory.
func wasmSection(id byte, content ...byte) []byte {
	return append([]byte{id, byte(len(content))}, content...)
}

func wasmName(s string) []byte { return append([]byte{byte(len(s))}, s...) }

var trapGuest = func() []byte {
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	code := []byte{0x00, 0x00, 0x0b} // no locals, unreachable, end
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

// realGuestNode is a node on WasmGuests, serving on 127.0.0.1:0, with an
// empty catalog: everything it runs is deployed through the admin API.
type realGuestNode struct {
	t      *testing.T
	node   *Node
	url    string
	client *http.Client
}

func startRealGuestNode(t *testing.T) *realGuestNode {
	t.Helper()
	p := testPolicy(t)
	// Fuel is execution time (edge/guest): a Go guest that has its memory
	// growth refused spends a while in its runtime before it gives up,
	// longer than the shared policy's one second on a busy machine, so
	// the guests here may burn up to realGuestFuel; the wall time ceiling
	// (five seconds) still bounds every run.
	p.Node.BudgetCeiling.CPUFuel = realGuestFuel
	// And a guest may run for up to realGuestWallTime: under -race on a
	// loaded machine that same Go runtime takes more than the shared
	// policy's five seconds to give up.
	p.Node.BudgetCeiling.WallTime = realGuestWallTime
	guests, err := NewWasmGuests(context.Background(), WasmConfig{ArtifactsDir: filepath.Join(t.TempDir(), "artifacts"),
		MaxResponseBytes: realGuestMaxResponse, MaxMemoryBytes: p.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{Policy: p, Tokens: testTokens(t), Guests: guests, Load: loadFiles(""), Logger: quietLogger(),
		ShutdownGrace: 2 * time.Second})
	if err != nil {
		_ = guests.Close(context.Background())
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rn := &realGuestNode{t: t, node: n, url: "http://" + l.Addr().String(),
		client: &http.Client{Transport: &http.Transport{}, Timeout: deployTestTimeout}}
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

func (rn *realGuestNode) do(method, path, token string, body []byte, headers ...string) response {
	rn.t.Helper()
	r := send(rn.t, rn.client, rn.url, method, path, token, body, lastWins(headers)...)
	if rn.t.Failed() {
		rn.t.FailNow()
	}
	return r
}

// lastWins keeps, of name, value pairs that repeat a name, the last: a
// case's header overrides the default its caller set before it.
func lastWins(headers []string) []string {
	var out []string
	at := map[string]int{}
	for i := 0; i+1 < len(headers); i += 2 {
		name := http.CanonicalHeaderKey(headers[i])
		if j, ok := at[name]; ok {
			out[j+1] = headers[i+1]
			continue
		}
		at[name] = len(out)
		out = append(out, name, headers[i+1])
	}
	return out
}

// putArtifact uploads module through PUT /v1/admin/artifacts and returns
// its digest.
func (rn *realGuestNode) putArtifact(module []byte) string {
	rn.t.Helper()
	digest := guest.DigestOf(module).String()
	hexDigest := strings.TrimPrefix(digest, "sha256:")
	if r := rn.do(http.MethodPut, "/v1/admin/artifacts/sha256/"+hexDigest, adminToken, module); r.status != http.StatusOK {
		rn.t.Fatalf("artifact upload: %d %s", r.status, r.body)
	}
	return digest
}

// realGuestRoute is one route of the deployment, in the catalog's JSON form.
func realGuestRoute(name, digest string) string {
	return `{"route":"` + name + `","contract":"text.v1","function":"` + name + `","revisions":[{
  "release":{"artifact_digest":"` + digest + `","version":"1.0.0"},"weight":1,
  "policy":{"trust_class":"standard","backend":"wasm","threading":"single","state_model":"stateless","features":[],
   "call_depth_limit":4,"capsule_ceiling":{},"deployment_ceiling":{"memory_bytes":33554432,"wall_time_ms":60000},
   "placement":{"architectures":[],"regions":[],"zones":[]}}}]}`
}

// deployGuests uploads the Go guest and the trap module and deploys
// acme/guests: route "upper" runs the Go guest, "trap" the trap module.
func (rn *realGuestNode) deployGuests() {
	rn.t.Helper()
	upper := rn.putArtifact(uppercaseGuest(rn.t))
	trap := rn.putArtifact(trapGuest)
	doc := `{"tenant":"acme","service":"guests","routes":[` + realGuestRoute("upper", upper) + `,` + realGuestRoute("trap", trap) + `]}`
	r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/guests", adminToken, []byte(doc))
	if r.status != http.StatusOK {
		rn.t.Fatalf("deploy: %d %s", r.status, r.body)
	}
}

// ledgerAtZero waits (boundedly) until the node holds no reservation and
// runs nothing, then checks the tenant's usage endpoint and the node's
// snapshot: every dimension back at zero.
func (rn *realGuestNode) ledgerAtZero() {
	rn.t.Helper()
	deadline := time.Now().Add(patience)
	for rn.node.Provider().LiveReservations() != 0 || len(rn.node.Pipeline().Counters().Residue()) != 0 {
		if time.Now().After(deadline) {
			rn.t.Fatalf("still held: %d reservations, %v", rn.node.Provider().LiveReservations(), rn.node.Pipeline().Counters().Residue())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := rn.do(http.MethodGet, "/v1/tenants/acme/usage", aliceToken, nil)
	if r.status != http.StatusOK {
		rn.t.Fatalf("usage: %d %s", r.status, r.body)
	}
	var u usageJSON
	if err := json.Unmarshal(r.body, &u); err != nil {
		rn.t.Fatalf("usage %s: %v", r.body, err)
	}
	if u.Live != 0 || u.Queued != 0 || u.CPUFuel != 0 || u.MemoryBytes != 0 {
		rn.t.Errorf("tenant acme not at zero: %s", r.body)
	}
	if s := rn.node.Provider().NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		rn.t.Errorf("node not at zero: %+v", s)
	}
}

func TestRealGuestsOverLoopback(t *testing.T) {
	uppercaseGuest(t)
	t.Logf("go build of the Go guest (GOOS=wasip1 GOARCH=wasm): %v, %d bytes", realGuestBuild.took, len(realGuestBuild.module))
	rn := startRealGuestNode(t)
	start := time.Now()
	rn.deployGuests()
	t.Logf("upload and deploy (wazero compiles both modules): %v", time.Since(start))

	const mib = "1048576"
	for _, tc := range []struct {
		name    string
		route   string
		input   string
		headers []string
		status  int
		outcome string
		body    string // the exact body of a 200 or 422; "" for the others
		atLeast time.Duration
	}{
		{name: "success: 200 with standard output", route: "upper", input: "hello, guest",
			status: http.StatusOK, outcome: OutcomeSuccess, body: "HELLO, GUEST"},
		{name: "output of exactly the response bound: 200", route: "upper", input: strings.Repeat("a", realGuestMaxResponse),
			status: http.StatusOK, outcome: OutcomeSuccess, body: strings.Repeat("A", realGuestMaxResponse)},
		{name: "output one byte beyond the response bound: 502 trap, no body", route: "upper", input: strings.Repeat("a", realGuestMaxResponse+1),
			status: http.StatusBadGateway, outcome: OutcomeTrap},
		{name: "output without end: 502 trap", route: "upper", input: "!flood",
			status: http.StatusBadGateway, outcome: OutcomeTrap},
		{name: "non-zero exit: 422 with standard output", route: "upper", input: "!exit 3",
			status: http.StatusUnprocessableEntity, outcome: OutcomeDeclaredError, body: "declared error 3\n"},
		{name: "an infinite loop is interrupted at the permit's deadline: 504", route: "upper", input: "!loop",
			headers: []string{HeaderWallTimeMs, "300"}, status: http.StatusGatewayTimeout, outcome: OutcomeDeadline, atLeast: 250 * time.Millisecond},
		{name: "a sleep is woken at the permit's deadline: 504", route: "upper", input: "!sleep",
			headers: []string{HeaderWallTimeMs, "300"}, status: http.StatusGatewayTimeout, outcome: OutcomeDeadline, atLeast: 250 * time.Millisecond},
		{name: "memory growth beyond the grant: 502", route: "upper", input: "!alloc",
			headers: []string{HeaderMemoryBytes, "16777216"}, status: http.StatusBadGateway, outcome: OutcomeMemory},
		{name: "an unreachable trap: 502", route: "trap", headers: []string{HeaderMemoryBytes, mib},
			status: http.StatusBadGateway, outcome: OutcomeTrap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rn.t = t
			headers := append([]string{HeaderMemoryBytes, "33554432"}, tc.headers...)
			start := time.Now()
			r := rn.do(http.MethodPost, "/v1/invoke/acme/guests/"+tc.route, aliceToken, []byte(tc.input), headers...)
			took := time.Since(start)
			if r.status != tc.status || r.header.Get(HeaderOutcome) != tc.outcome {
				t.Fatalf("%d %s=%q %q; want %d %q", r.status, HeaderOutcome, r.header.Get(HeaderOutcome), r.body, tc.status, tc.outcome)
			}
			switch tc.status {
			case http.StatusOK, http.StatusUnprocessableEntity:
				if string(r.body) != tc.body {
					t.Errorf("body %q, want %q", r.body, tc.body)
				}
			default:
				// The guest's output never reaches the caller: the edge's
				// own error naming the outcome.
				var e map[string]any
				if err := json.Unmarshal(r.body, &e); err != nil || len(e) != 1 || e["error"] != "the activation ended: "+tc.outcome {
					t.Errorf("body %q, want only the edge's error for %s", r.body, tc.outcome)
				}
			}
			// The upper bound only tells a hang (the outcome tells a
			// deadline from fuel): a loaded machine under -race is slow.
			if took < tc.atLeast || took > patience {
				t.Errorf("answered after %v, want between %v and %v", took, tc.atLeast, patience)
			}
			rn.ledgerAtZero()
		})
	}
	rn.t = t
	// The node still serves the guest after every way it can end.
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/guests/upper", aliceToken, []byte("again"), HeaderMemoryBytes, "33554432"); r.status != http.StatusOK || string(r.body) != "AGAIN" {
		t.Fatalf("after the failures: %d %q", r.status, r.body)
	}
	rn.ledgerAtZero()
}
