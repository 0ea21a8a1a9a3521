package latentd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/edge/guest"
)

// wasmCommand is a hand-assembled WASI command with one page of memory
// whose _start has code (no locals; code ends with end), with a table
// section (content, or nil for none) and, when start is set, a start
// section naming _start.
func wasmCommand(table []byte, start bool, code ...byte) []byte {
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	exports := []byte{0x02}
	exports = append(append(exports, wasmName("_start")...), 0x00, 0x00)
	exports = append(append(exports, wasmName("memory")...), 0x02, 0x00)
	body := append([]byte{0x00}, code...)
	sections := [][]byte{wasmSection(1, 0x01, 0x60, 0x00, 0x00), wasmSection(3, 0x01, 0x00)}
	if table != nil {
		sections = append(sections, wasmSection(4, table...))
	}
	sections = append(sections, wasmSection(5, 0x01, 0x00, 0x01), wasmSection(7, exports...))
	if start {
		sections = append(sections, wasmSection(8, 0x00))
	}
	sections = append(sections, wasmSection(10, append([]byte{0x01, byte(len(body))}, body...)...))
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

func TestModulesTheNodeCannotAffordAreRefusedAt422NamingTheRule(t *testing.T) {
	rn := startRealGuestNode(t)
	for _, c := range []struct {
		name, mention string
		module        []byte
	}{
		{"a module that can grow a table", "table.grow",
			wasmCommand([]byte{0x01, 0x70, 0x00, 0x01}, false, 0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a, 0x0b)},
		{"a module with a start section", "start section",
			wasmCommand(nil, true, 0x0b)},
		{"a module whose tables start past the limit", "entries",
			wasmCommand([]byte{0x01, 0x70, 0x00, 0xff, 0xff, 0xff, 0xff, 0x0f}, false, 0x0b)},
	} {
		t.Run(c.name, func(t *testing.T) {
			digest := rn.putArtifact(c.module)
			doc := `{"tenant":"acme","service":"limits","routes":[` + realGuestRoute("r", digest) + `]}`
			r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/limits", adminToken, []byte(doc))
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), c.mention) {
				t.Fatalf("deploy: %d %s, want 422 naming %q", r.status, r.body, c.mention)
			}
		})
	}
}

// TestDeepRecursionOverLoopbackLeavesTheNodeServing: a guest recursing
// without end is answered by a living node. The answer is 502 trap when
// the stack limit is reached first; copying the doubling stacks takes
// long enough under the race detector on a loaded machine that the wall
// time (five seconds in the test policy) may end it first, as 504
// deadline: both are answers, and the node serves on. edge/guest's
// TestDeepRecursionOnEveryCellAtOnceLeavesTheNodeServing asserts the trap
// on every cell at once.
func TestDeepRecursionOverLoopbackLeavesTheNodeServing(t *testing.T) {
	rn := startRealGuestNode(t)
	deep := rn.putArtifact(wasmCommand(nil, false, 0x10, 0x00, 0x0b)) // _start calls itself
	trap := rn.putArtifact(trapGuest)
	doc := `{"tenant":"acme","service":"deep","routes":[` + realGuestRoute("deep", deep) + `,` + realGuestRoute("trap", trap) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/deep", adminToken, []byte(doc)); r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	r := rn.do(http.MethodPost, "/v1/invoke/acme/deep/deep", aliceToken, nil)
	outcome := r.header.Get("Latent-Outcome")
	if (r.status != http.StatusBadGateway || outcome != OutcomeTrap) && (r.status != http.StatusGatewayTimeout || outcome != OutcomeDeadline) {
		t.Fatalf("deep recursion: %d %s %s, want 502 trap (or 504 deadline)", r.status, outcome, r.body)
	}
	t.Logf("deep recursion: %d %s", r.status, outcome)
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/deep/trap", aliceToken, nil); r.status != http.StatusBadGateway || r.header.Get("Latent-Outcome") != OutcomeTrap {
		t.Fatalf("after the recursion: %d %s", r.status, r.body)
	}
	rn.ledgerAtZero()
}

// uleb is v as unsigned LEB128.
func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		if v >>= 7; v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// bombSection is a section of any size.
func bombSection(id byte, content ...[]byte) []byte {
	var c []byte
	for _, part := range content {
		c = append(c, part...)
	}
	return append(append([]byte{id}, uleb(uint64(len(c)))...), c...)
}

// wasmHeader is the magic number and version every module starts with.
var wasmHeader = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// countBomb is a module of a few dozen bytes whose section id announces
// 2^32-1 items, the rest of it (prefix, then a few bytes of items) too
// short to hold them: wazero's decoder makes a slice of the count before
// it reads an item, which for most sections is tens of gigabytes.
func countBomb(sections ...[]byte) []byte {
	m := append([]byte{}, wasmHeader...)
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

// most is 2^32-1, the largest count a module can encode.
var most = uleb(1<<32 - 1)

// oneType is a type section of one function type () -> ().
var oneType = bombSection(1, []byte{0x01, 0x60, 0x00, 0x00})

func TestSectionCountBombsAreRefusedAt422AndTheNodeServesOn(t *testing.T) {
	rn := startRealGuestNode(t)
	rn.deployGuests()
	filler := []byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}
	for _, c := range []struct {
		name, mention string
		module        []byte
	}{
		{"types", "function types", countBomb(bombSection(1, most, filler))},
		{"parameters of one type", "parameters and results", countBomb(bombSection(1, []byte{0x01, 0x60}, most, filler))},
		{"imports", "imports", countBomb(bombSection(2, most, filler))},
		{"an import's name", "not a valid WebAssembly module", countBomb(bombSection(2, []byte{0x01}, most, filler))},
		{"functions", "functions", countBomb(oneType, bombSection(3, most, filler))},
		{"tables", "tables", countBomb(bombSection(4, most, filler))},
		{"memories", "memory", countBomb(bombSection(5, most, filler))},
		{"globals", "globals", countBomb(bombSection(6, most, filler))},
		{"exports", "exports", countBomb(bombSection(7, most, filler))},
		{"an export's name", "not a valid WebAssembly module", countBomb(bombSection(7, []byte{0x01}, most, filler))},
		{"element segments", "element segments", countBomb(bombSection(9, most, filler))},
		{"entries of a passive element segment", "entries", countBomb(bombSection(9, []byte{0x01, 0x01, 0x00}, most, filler))},
		{"entries of an active element segment", "entries", countBomb(bombSection(9, []byte{0x01, 0x00, 0x41, 0x00, 0x0b}, most, filler))},
		{"expressions of an element segment", "entries", countBomb(bombSection(9, []byte{0x01, 0x05, 0x70}, most, filler))},
		{"data count", "data segments", countBomb(bombSection(12, most))},
		{"data segments", "data segments", countBomb(bombSection(11, most, filler))},
		{"a data segment's bytes", "not a valid WebAssembly module", countBomb(bombSection(11, []byte{0x01, 0x01}, most, filler))},
		{"code", "functions", countBomb(oneType, bombSection(10, most, filler))},
		{"locals", "locals", countBomb(oneType, bombSection(3, []byte{0x01, 0x00}), bombSection(10, []byte{0x01, 0x10, 0x01}, most, []byte{0x7f}, filler[:9], []byte{0x0b}))},
		{"labels of a br_table", "labels", countBomb(oneType, bombSection(3, []byte{0x01, 0x00}),
			bombSection(10, []byte{0x01, 0x1a, 0x00, 0x41, 0x00, 0x0e}, most, filler, []byte{0x00, 0x0b}))},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("%d bytes", len(c.module))
			digest := rn.putArtifact(c.module)
			doc := `{"tenant":"acme","service":"bombs","routes":[` + realGuestRoute("r", digest) + `]}`
			r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/bombs", adminToken, []byte(doc))
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), c.mention) {
				t.Fatalf("deploy: %d %s, want 422 naming %q", r.status, r.body, c.mention)
			}
			// The node lives and serves.
			if r := rn.do(http.MethodPost, "/v1/invoke/acme/guests/upper", aliceToken, []byte("still here")); r.status != http.StatusOK || string(r.body) != "STILL HERE" {
				t.Fatalf("after the bomb: %d %s", r.status, r.body)
			}
		})
	}
	rn.ledgerAtZero()
}

// TestANameSectionBombIsNeverDecoded: custom sections, "name" among them,
// never reach wazero's decoder, which would allocate for a name map's
// count; a module carrying one deploys and runs as it would without it.
func TestANameSectionBombIsNeverDecoded(t *testing.T) {
	rn := startRealGuestNode(t)
	nameBomb := append(wasmCommand(nil, false, 0x0b), bombSection(0, wasmName("name"), []byte{0x01}, uleb(6), most, []byte{0x00})...)
	digest := rn.putArtifact(nameBomb)
	doc := `{"tenant":"acme","service":"named","routes":[` + realGuestRoute("r", digest) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/named", adminToken, []byte(doc)); r.status != http.StatusOK {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/named/r", aliceToken, nil); r.status != http.StatusOK {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	rn.ledgerAtZero()
}

// commandWithCode is a WASI command with one page of memory whose _start
// (no locals) is code, which ends with end, of any size.
func commandWithCode(code []byte) []byte {
	exports := []byte{0x02}
	exports = append(append(exports, wasmName("_start")...), 0x00, 0x00)
	exports = append(append(exports, wasmName("memory")...), 0x02, 0x00)
	body := append([]byte{0x00}, code...)
	return countBomb(oneType, bombSection(3, []byte{0x01, 0x00}), bombSection(5, []byte{0x01, 0x00, 0x01}),
		bombSection(7, exports), bombSection(10, []byte{0x01}, uleb(uint64(len(body))), body))
}

// brTableCode is a block holding one br_table of labels labels, all to
// that block, then end.
func brTableCode(labels int) []byte {
	code := append([]byte{0x02, 0x40, 0x41, 0x00, 0x0e}, uleb(uint64(labels))...)
	for range labels + 1 {
		code = append(code, 0x00)
	}
	return append(code, 0x0b, 0x0b)
}

func TestABrTableAtTheLabelLimitDeploysAndOnePastItIsRefusedAt422(t *testing.T) {
	rn := startRealGuestNode(t)
	at := rn.putArtifact(commandWithCode(brTableCode(guest.MaxBrTableLabels)))
	doc := `{"tenant":"acme","service":"labels","routes":[` + realGuestRoute("r", at) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/labels", adminToken, []byte(doc)); r.status != http.StatusOK {
		t.Fatalf("deploy at the limit: %d %s", r.status, r.body)
	}
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/labels/r", aliceToken, nil); r.status != http.StatusOK {
		t.Fatalf("invoke: %d %s", r.status, r.body)
	}
	past := rn.putArtifact(commandWithCode(brTableCode(guest.MaxBrTableLabels + 1)))
	doc = `{"tenant":"acme","service":"labels","routes":[` + realGuestRoute("r", past) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/labels", adminToken, []byte(doc)); r.status != http.StatusUnprocessableEntity ||
		!strings.Contains(string(r.body), "labels") {
		t.Fatalf("deploy past the limit: %d %s, want 422 naming the label limit", r.status, r.body)
	}
	rn.ledgerAtZero()
}

// items is n copies of item, after their count.
func items(n int, item ...byte) []byte {
	out := uleb(uint64(n))
	for range n {
		out = append(out, item...)
	}
	return out
}

// heavyCommand is a WASI command with one page of memory and an empty
// _start, with the sections given (id and content) placed in order
// around its own.
func heavyCommand(extra map[byte][]byte) []byte {
	var imports uint64
	if extra[2] != nil {
		// Every import here is a function: _start comes after them.
		imports, _ = binary.Uvarint(extra[2]) // LEB128
	}
	exports := append([]byte{0x02}, wasmName("_start")...)
	exports = append(append(exports, 0x00), uleb(imports)...)
	exports = append(append(exports, wasmName("memory")...), 0x02, 0x00)
	types := []byte{0x02, 0x60, 0x00, 0x00, 0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f} // () -> (), fd_write's
	sections := map[byte][]byte{1: types, 3: {0x01, 0x00}, 5: {0x01, 0x00, 0x01}, 7: exports, 10: {0x01, 0x02, 0x00, 0x0b}}
	for id, content := range extra {
		sections[id] = content
	}
	m := append([]byte{}, wasmHeader...)
	for _, id := range []byte{1, 2, 3, 4, 5, 6, 7, 9, 12, 10, 11} {
		if c, ok := sections[id]; ok {
			m = append(m, bombSection(id, c)...)
		}
	}
	return m
}

// TestTheReviewsHeavyModulesAreRefusedAt422: the modules of the review
// whose instantiation took gigabytes and seconds outside the grant
// (passive element entries, globals, element segments, imports), each
// one past its limit, and a module within every count whose
// instantiation together passes the instance budget, are refused at
// deploy, naming the limit; the node serves on.
func TestTheReviewsHeavyModulesAreRefusedAt422(t *testing.T) {
	rn := startRealGuestNode(t)
	rn.deployGuests()
	fdWrite := append(append(wasmName("wasi_snapshot_preview1"), wasmName("fd_write")...), 0x00, 0x01)
	for _, c := range []struct {
		name, mention string
		module        []byte
	}{
		{"a passive element segment past the entries limit", "entries",
			heavyCommand(map[byte][]byte{9: append([]byte{0x01, 0x01, 0x00}, items(guest.MaxElementEntries+1, 0x00)...)})},
		{"globals past the limit", "globals",
			heavyCommand(map[byte][]byte{6: items(guest.MaxGlobals+1, 0x7e, 0x01, 0x42, 0x00, 0x0b)})},
		{"element segments past the limit", "element segments",
			heavyCommand(map[byte][]byte{9: items(guest.MaxElementSegments+1, 0x01, 0x00, 0x00)})},
		{"imports past the limit", "imports",
			heavyCommand(map[byte][]byte{2: items(guest.MaxImports+1, fdWrite...)})},
		{"a table at its limit and globals at theirs: past the instance budget", "instantiation",
			heavyCommand(map[byte][]byte{4: append([]byte{0x01, 0x70, 0x00}, uleb(guest.MaxTableEntries)...),
				6: items(guest.MaxGlobals, 0x7e, 0x01, 0x42, 0x00, 0x0b)})},
	} {
		t.Run(c.name, func(t *testing.T) {
			digest := rn.putArtifact(c.module)
			doc := `{"tenant":"acme","service":"heavy","routes":[` + realGuestRoute("r", digest) + `]}`
			r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/heavy", adminToken, []byte(doc))
			if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), c.mention) {
				t.Fatalf("deploy: %d %s, want 422 naming %q", r.status, r.body, c.mention)
			}
			if r := rn.do(http.MethodPost, "/v1/invoke/acme/guests/upper", aliceToken, []byte("still here")); r.status != http.StatusOK {
				t.Fatalf("after the refusal: %d %s", r.status, r.body)
			}
		})
	}
	rn.ledgerAtZero()
}

// TestAStoredDeploymentTheLimitsRefuseLeavesTheNodeServing: a deployment
// stored before the module limits refused its artifact does not stop the
// node from starting: latentd logs it, naming the deployment and the
// rule, serves the other deployments, and answers that one as not
// available.
func TestAStoredDeploymentTheLimitsRefuseLeavesTheNodeServing(t *testing.T) {
	dir := t.TempDir()
	artifacts, storeDir := filepath.Join(dir, "artifacts"), filepath.Join(dir, "catalog")
	store, err := guest.OpenStore(artifacts, 0)
	if err != nil {
		t.Fatal(err)
	}
	good, refused := commandWithCode([]byte{0x0b}), commandWithCode(brTableCode(guest.MaxBrTableLabels+1))
	for _, m := range [][]byte{good, refused} {
		if err := store.Put(guest.DigestOf(m), bytes.NewReader(m)); err != nil {
			t.Fatal(err)
		}
	}
	file, err := catalog.DecodeCatalogFile([]byte(`{"deployments":[
		{"tenant":"acme","service":"good","routes":[`+realGuestRoute("r", guest.DigestOf(good).String())+`]},
		{"tenant":"acme","service":"stale","routes":[`+realGuestRoute("r", guest.DigestOf(refused).String())+`]}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Create(storeDir, catalog.GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range file.Deployments {
		if _, err := c.Deploy(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	p := testPolicy(t)
	guests, err := NewWasmGuests(context.Background(), WasmConfig{ArtifactsDir: artifacts,
		MaxResponseBytes: realGuestMaxResponse, MaxMemoryBytes: p.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	n, err := New(Config{Policy: p, Tokens: testTokens(t), Guests: guests, Load: loadFiles(""),
		Logger: slog.New(slog.NewTextHandler(log, nil)), ShutdownGrace: 2 * time.Second, StoreDir: storeDir})
	if err != nil {
		_ = guests.Close(context.Background())
		t.Fatalf("New with a stored deployment the limits refuse: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rn := &realGuestNode{t: t, node: n, url: "http://" + l.Addr().String(),
		client: &http.Client{Transport: &http.Transport{}, Timeout: deployTestTimeout}}
	served := make(chan error, 1)
	go func() { served <- n.Serve(l) }()
	defer func() {
		rn.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()

	log.mu.Lock()
	logged := log.buf.String()
	log.mu.Unlock()
	if !strings.Contains(logged, "service=stale") || !strings.Contains(logged, "tenant=acme") || !strings.Contains(logged, "labels") {
		t.Errorf("the log does not name the deployment and the rule:\n%s", logged)
	}
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/good/r", aliceToken, nil); r.status != http.StatusOK {
		t.Fatalf("the other deployment: %d %s", r.status, r.body)
	}
	for range 2 { // the same answer however often it is asked
		r := rn.do(http.MethodPost, "/v1/invoke/acme/stale/r", aliceToken, nil)
		if r.status != StatusFor(core.ErrRevisionNotAvailable) || !strings.Contains(string(r.body), string(core.ReasonRevisionNotAvailable)) {
			t.Fatalf("the refused deployment: %d %s, want it not available", r.status, r.body)
		}
	}
	// A redeploy of the pair with a module the limits admit makes it
	// available again.
	doc := `{"tenant":"acme","service":"stale","routes":[` + realGuestRoute("r", guest.DigestOf(good).String()) + `]}`
	if r := rn.do(http.MethodPut, "/v1/admin/deployments/acme/stale", adminToken, []byte(doc)); r.status != http.StatusOK {
		t.Fatalf("redeploy: %d %s", r.status, r.body)
	}
	if r := rn.do(http.MethodPost, "/v1/invoke/acme/stale/r", aliceToken, nil); r.status != http.StatusOK {
		t.Fatalf("after the redeploy: %d %s", r.status, r.body)
	}
	rn.ledgerAtZero()
}
