package latentd

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log sink the server's goroutines write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("an access-log line is not JSON: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// One structured line per answered request, with only validated values:
// the tenant once the caller is authenticated for it, configured names,
// the checked activation ID; never a token, a payload or another header.
func TestAccessLogOneLinePerRequest(t *testing.T) {
	sink := &syncBuffer{}
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.AccessLog = slog.New(slog.NewJSONHandler(sink, nil))
	}})
	const payload = "secret-payload-bytes"
	ok := tn.invoke("acme/echo/run", aliceToken, payload, HeaderActivationID, "act-0001")
	if ok.status != http.StatusOK {
		t.Fatalf("invoke: %d %s", ok.status, ok.body)
	}
	if r := tn.invoke("acme/echo/run", "not-a-token", payload); r.status != http.StatusUnauthorized {
		t.Fatalf("bad token: %d", r.status)
	}
	if r := tn.invoke("globex/echo/run", aliceToken, payload); r.status != http.StatusForbidden {
		t.Fatalf("another tenant: %d", r.status)
	}
	if r := tn.invoke("acme/nothing-here/run", aliceToken, payload, HeaderActivationID, "act-0002"); r.status != http.StatusNotFound {
		t.Fatalf("unknown route: %d %s", r.status, r.body)
	}
	if r := tn.do(http.MethodGet, "/no/such/path", "", nil); r.status != http.StatusNotFound {
		t.Fatalf("unmatched: %d", r.status)
	}

	lines := sink.lines(t)
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5: %v", len(lines), lines)
	}
	want := []map[string]any{
		{"method": "POST", "path": "/v1/invoke/{tenant}/{service}/{route}", "tenant": "acme", "service": "echo", "route": "run",
			"activation_id": "act-0001", "status": float64(200), "outcome": OutcomeSuccess, "bytes_in": float64(len(payload))},
		{"method": "POST", "path": "/v1/invoke/{tenant}/{service}/{route}", "status": float64(401)},
		{"method": "POST", "path": "/v1/invoke/{tenant}/{service}/{route}", "status": float64(403), "reason": "principal-not-authorized"},
		{"method": "POST", "path": "/v1/invoke/{tenant}/{service}/{route}", "tenant": "acme", "activation_id": "act-0002",
			"status": float64(404), "reason": "revision-not-available"},
		{"method": "GET", "path": "unmatched", "status": float64(404)},
	}
	for i, w := range want {
		got := lines[i]
		for k, v := range w {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[k], v, got)
			}
		}
		for _, k := range []string{"tenant", "service", "route", "activation_id", "outcome", "reason"} {
			if _, has := w[k]; !has && got[k] != nil {
				t.Errorf("line %d: %s = %v, want none (%v)", i, k, got[k], got)
			}
		}
		for _, k := range []string{"time", "duration", "bytes_in", "bytes_out"} {
			if got[k] == nil {
				t.Errorf("line %d lacks %s: %v", i, k, got)
			}
		}
	}
	if lines[0]["bytes_out"] != float64(len(ok.body)) {
		t.Errorf("bytes_out %v, want %d", lines[0]["bytes_out"], len(ok.body))
	}
	raw := func() string { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.buf.String() }()
	for _, secret := range []string{aliceToken, "not-a-token", payload, "globex", "nothing-here", "/no/such"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the access log holds %q:\n%s", secret, raw)
		}
	}
}

// An invocation without an activation ID gets one the node generated,
// and the access log notes it: it is the node's, not a caller's string,
// so it needs no identifier check, even on a node whose identifier bound
// is shorter than a generated ID (admission then refuses the request,
// and the line still names the ID the answer carried).
func TestAccessLogNotesAGeneratedActivationID(t *testing.T) {
	for _, maxID := range []uint32{128, 24} {
		sink := &syncBuffer{}
		tn := startNode(t, nodeOptions{mutate: func(c *Config) {
			c.AccessLog = slog.New(slog.NewJSONHandler(sink, nil))
			c.Policy.Node.MaximumIdentifierBytes = maxID
		}})
		r := tn.invoke("acme/echo/run", aliceToken, "p")
		id := r.header.Get(HeaderActivationID)
		if len(id) != 32 {
			t.Fatalf("identifier bound %d: the answer's activation ID is %q (status %d %s)", maxID, id, r.status, r.body)
		}
		lines := sink.lines(t)
		if len(lines) != 1 || lines[0]["activation_id"] != id {
			t.Fatalf("identifier bound %d: the log holds %v, want activation_id %s", maxID, lines, id)
		}
	}
}

// An activation ID that admission refuses (too long, or with a byte an
// identifier may not hold) is never logged: the line has none.
func TestAccessLogLeavesOutAnInvalidActivationID(t *testing.T) {
	sink := &syncBuffer{}
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.AccessLog = slog.New(slog.NewJSONHandler(sink, nil))
	}})
	long := "act-" + strings.Repeat("x", 3000)
	for _, id := range []string{long, "act with spaces"} {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderActivationID, id)
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "identifier-invalid") {
			t.Fatalf("activation ID %.20q: %d %s", id, r.status, r.body)
		}
	}
	lines := sink.lines(t)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(lines), lines)
	}
	for i, line := range lines {
		if line["activation_id"] != nil || line["reason"] != "identifier-invalid" || line["status"] != float64(400) {
			t.Errorf("line %d: activation_id %.40v, reason %v, status %v", i, line["activation_id"], line["reason"], line["status"])
		}
	}
	raw := func() string { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.buf.String() }()
	if strings.Contains(raw, "xxxxxxxx") || strings.Contains(raw, "with spaces") {
		t.Errorf("the access log holds the refused activation ID:\n%.300s", raw)
	}
}

// Without an access logger nothing is logged, and the status page still
// records invocations.
func TestNoAccessLogByDefault(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	if tn.node.cfg.AccessLog != nil {
		t.Fatal("an access log by default")
	}
	if r := tn.invoke("acme/echo/run", aliceToken, "x"); r.status != http.StatusOK {
		t.Fatalf("invoke: %d", r.status)
	}
	if d, _ := tn.status(); len(d.Outcomes.Recent) != 1 || d.Outcomes.Recent[0].Route != "run" {
		t.Errorf("recent outcomes %+v", d.Outcomes.Recent)
	}
}

// BenchmarkInvokeAccessLog is one invocation over loopback HTTP (the fake
// guest echoes), without the access log and with it (JSON, discarded):
// what the log adds to the invocation path.
func BenchmarkInvokeAccessLog(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "log=off"
		if on {
			name = "log=on"
		}
		b.Run(name, func(b *testing.B) {
			tn := startNode(b, nodeOptions{mutate: func(c *Config) {
				if on {
					c.AccessLog = slog.New(slog.NewJSONHandler(io.Discard, nil))
				}
			}})
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if r := tn.invoke("acme/echo/run", aliceToken, "x"); r.status != http.StatusOK {
					b.Fatalf("invoke: %d %s", r.status, r.body)
				}
			}
		})
	}
}
