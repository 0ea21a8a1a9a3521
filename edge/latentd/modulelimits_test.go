package latentd

import (
	"net/http"
	"strings"
	"testing"
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
