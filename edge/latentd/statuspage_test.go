package latentd

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/core"
)

// statusDoc is GET /v1/admin/status, decoded strictly enough to compare.
type statusDoc struct {
	NowUnixMS int64 `json:"now_unix_ms"`
	Scopes    []struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		Dimensions []struct {
			Dimension string `json:"dimension"`
			Reserved  uint64 `json:"reserved"`
			Limit     uint64 `json:"limit"`
		} `json:"dimensions"`
	} `json:"scopes"`
	QueueClasses []struct {
		Name      string `json:"name"`
		Queued    uint64 `json:"queued_reservations"`
		MaxQueued uint64 `json:"max_queued"`
	} `json:"queue_classes"`
	CellClasses []struct {
		Class       string `json:"class"`
		Live        uint64 `json:"live_activations"`
		Parallelism uint64 `json:"parallelism"`
	} `json:"cell_classes"`
	Load *struct {
		CPU, Memory float64
		AgeMS       int64 `json:"age_ms"`
		MaxAgeMS    int64 `json:"max_age_ms"`
	} `json:"load"`
	Rejections struct {
		WindowMS int64 `json:"window_ms"`
		Total    int64 `json:"total"`
		ByReason []struct {
			Reason string `json:"reason"`
			Count  int64  `json:"count"`
		} `json:"by_reason"`
	} `json:"rejections"`
	Outcomes struct {
		Capacity int `json:"capacity"`
		Recent   []struct {
			AtUnixMS   int64   `json:"at_unix_ms"`
			Tenant     string  `json:"tenant"`
			Service    string  `json:"service"`
			Route      string  `json:"route"`
			Outcome    string  `json:"outcome"`
			Status     int     `json:"status"`
			DurationMS float64 `json:"duration_ms"`
		} `json:"recent"`
	} `json:"outcomes"`
	Admitted int64 `json:"admitted"`
	Live     int   `json:"live_reservations"`
}

func decodeStatus(t testing.TB, body []byte) statusDoc {
	t.Helper()
	var d statusDoc
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("status body %q: %v", body, err)
	}
	return d
}

func (tn *testNode) status() (statusDoc, []byte) {
	tn.t.Helper()
	r := tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil)
	if r.status != http.StatusOK {
		tn.t.Fatalf("GET /v1/admin/status: %d %s", r.status, r.body)
	}
	return decodeStatus(tn.t, r.body), r.body
}

// reservedOf is one scope's four dimensions, reserved and limit.
func (d statusDoc) scope(kind, name string) map[string][2]uint64 {
	for _, s := range d.Scopes {
		if s.Kind == kind && s.Name == name {
			out := map[string][2]uint64{}
			for _, dim := range s.Dimensions {
				out[dim.Dimension] = [2]uint64{dim.Reserved, dim.Limit}
			}
			return out
		}
	}
	return nil
}

func wantScope(t *testing.T, d statusDoc, kind, name string, u core.ScopeUsage) {
	t.Helper()
	got := d.scope(kind, name)
	want := map[string][2]uint64{
		"live-activations":    {u.Live, u.Limits.MaxLiveActivations},
		"queued-reservations": {u.Queued, u.Limits.MaxQueuedReservations},
		"cpu-fuel":            {u.CPUFuel, u.Limits.MaxReservedCPUFuel},
		"memory-bytes":        {u.MemoryBytes, u.Limits.MaxReservedMemoryBytes},
	}
	if len(got) != 4 {
		t.Fatalf("scope %s %q: %v, want the four dimensions", kind, name, got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("scope %s %q %s: %v, want %v", kind, name, k, got[k], v)
		}
	}
}

func TestStatusPageIsAStaticShell(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	page := tn.do(http.MethodGet, "/status", "", nil)
	if page.status != http.StatusOK || !strings.HasPrefix(page.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /status: %d %q", page.status, page.header.Get("Content-Type"))
	}
	csp := page.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "style-src 'self'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP %q allows inline code", csp)
	}
	body := string(page.body)
	// No inline script or style, no handler attributes, nothing fetched
	// from elsewhere, no form that could put the token into a URL.
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]+</script>`),
		regexp.MustCompile(`<style`), regexp.MustCompile(`\son[a-z]+=`), regexp.MustCompile(`(?:src|href)="(?:https?:)?//`),
		regexp.MustCompile(`<form`), regexp.MustCompile(`<(?:input|textarea|select)[^>]*\sname=`), regexp.MustCompile(`\sstyle=`),
	} {
		if m := bad.FindString(body); m != "" {
			t.Errorf("the page holds %q", m)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(body, -1) {
		if !strings.Contains(tag, `src="/status.js"`) {
			t.Errorf("the page has a script of its own: %s", tag)
		}
	}
	for _, data := range []string{"acme", "globex", "standard", "interactive"} {
		if strings.Contains(body, data) {
			t.Errorf("the static page holds the node's data %q", data)
		}
	}
	for path, ctype := range map[string]string{"/status.js": "text/javascript", "/status.css": "text/css"} {
		r := tn.do(http.MethodGet, path, "", nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) || len(r.body) == 0 ||
			r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d %q %d bytes", path, r.status, r.header.Get("Content-Type"), len(r.body))
		}
		if !strings.Contains(body, `"`+path+`"`) {
			t.Errorf("the page does not load %s", path)
		}
	}
	js := string(tn.do(http.MethodGet, "/status.js", "", nil).body)
	for _, want := range []string{`location.hash`, `"Authorization": "Bearer " + token`, `"/v1/admin/status"`} {
		if !strings.Contains(js, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage", "sessionStorage", "?token"} {
		if strings.Contains(js, bad) {
			t.Errorf("the script uses %q", bad)
		}
	}
}

func TestAdminStatusIsForAdministrators(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for _, c := range []struct {
		name, token string
		status      int
	}{{"no token", "", 401}, {"an unknown token", "not-a-token", 401}, {"a tenant's token", aliceToken, 403},
		{"another tenant's token", bobToken, 403}, {"an unconfigured tenant's token", strayToken, 403}} {
		r := tn.do(http.MethodGet, "/v1/admin/status", c.token, nil)
		if r.status != c.status {
			t.Errorf("%s: %d, want %d", c.name, r.status, c.status)
		}
		for _, data := range []string{"acme", "globex", "live-activations", "scopes"} {
			if strings.Contains(string(r.body), data) {
				t.Errorf("%s: the refusal shows %q: %s", c.name, data, r.body)
			}
		}
	}
	// The token in a query string authorizes nothing.
	if r := tn.do(http.MethodGet, "/v1/admin/status?token="+adminToken, "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("a token in the query: %d", r.status)
	}
	if r := tn.do(http.MethodGet, "/v1/admin/status", adminToken, nil); r.status != http.StatusOK || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("an administrator: %d, Cache-Control %q", r.status, r.header.Get("Cache-Control"))
	}
}

func TestAdminStatusNumbers(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	before, _ := tn.status()
	if before.Live != 0 || len(before.Outcomes.Recent) != 0 || before.Rejections.Total != 0 || len(before.Rejections.ByReason) != 0 {
		t.Fatalf("a fresh node: %+v", before)
	}
	if before.Load == nil || before.Load.AgeMS < 0 || before.Load.AgeMS > before.Load.MaxAgeMS || before.Load.MaxAgeMS != 2000 {
		t.Fatalf("load: %+v", before.Load)
	}
	if before.Outcomes.Capacity != RecentOutcomes {
		t.Fatalf("capacity %d", before.Outcomes.Capacity)
	}

	// acme's live limit is 4: four guests hold, three more are refused for
	// capacity, and two payloads over acme's 2048 bytes are refused.
	held := make(chan response, 4)
	for i := 0; i < 4; i++ {
		go func() {
			held <- tn.invoke("acme/echo/run", aliceToken, "hold", HeaderActivationID, "<b>held-"+string(rune('a'+i))+"</b>")
		}()
	}
	for i := 0; i < 4; i++ {
		select {
		case <-tn.guests.started:
		case <-time.After(patience):
			t.Fatal("the held guests did not start")
		}
	}
	for i := 0; i < 3; i++ {
		if r := tn.invoke("acme/echo/run", aliceToken, "x"); r.status != http.StatusTooManyRequests {
			t.Fatalf("over the live limit: %d %s", r.status, r.body)
		}
	}
	for i := 0; i < 2; i++ {
		if r := tn.invoke("acme/echo/run", aliceToken, strings.Repeat("p", 3000)); r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("over acme's payload maximum: %d %s", r.status, r.body)
		}
	}
	// Not admitted, so no outcome: an unknown route, and another tenant's.
	if r := tn.invoke("acme/echo/no-such-route", aliceToken, "x"); r.status != http.StatusNotFound {
		t.Fatalf("unknown route: %d", r.status)
	}
	if r := tn.invoke("globex/x/y", aliceToken, "x"); r.status != http.StatusForbidden {
		t.Fatalf("another tenant: %d", r.status)
	}

	during, _ := tn.status()
	u := tn.node.Provider().Usage()
	if u.Tenants[0].Name != "acme" || u.Tenants[0].Live != 4 || u.Node.Live != 4 {
		t.Fatalf("usage: %+v", u)
	}
	wantScope(t, during, "node", "node", u.Node)
	for _, s := range u.Tenants {
		wantScope(t, during, "tenant", s.Name, s)
	}
	for _, s := range u.TrustClasses {
		wantScope(t, during, "trust-class", s.Name, s)
	}
	if got := during.scope("tenant", "acme")["live-activations"]; got != [2]uint64{4, 4} {
		t.Errorf("acme live: %v, want [4 4]", got)
	}
	if got := during.scope("tenant", "globex")["live-activations"]; got != [2]uint64{0, 8} {
		t.Errorf("globex live: %v, want [0 8]", got)
	}
	if len(during.Scopes) != 1+len(u.Tenants)+len(u.TrustClasses) {
		t.Errorf("%d scopes", len(during.Scopes))
	}
	if len(during.QueueClasses) != 2 || during.QueueClasses[0].Name != "batch" || during.QueueClasses[0].MaxQueued != 32 {
		t.Errorf("queue classes: %+v", during.QueueClasses)
	}
	var cellLive uint64
	for _, c := range during.CellClasses {
		cellLive += c.Live
	}
	if len(during.CellClasses) != 2 || during.CellClasses[0].Class != "tiny" || during.CellClasses[0].Parallelism != 8 || cellLive != 4 {
		t.Errorf("cell classes: %+v", during.CellClasses)
	}
	if during.Live != 4 || during.Admitted != 4 {
		t.Errorf("live %d admitted %d, want 4 and 4", during.Live, during.Admitted)
	}
	reasons := map[string]int64{}
	for _, r := range during.Rejections.ByReason {
		reasons[r.Reason] = r.Count
	}
	// The unknown route and the other tenant's path are answered by the
	// edge before admission, which counts only its own rejections.
	want := map[string]int64{"capacity-exhausted": 3, "payload-too-large": 2}
	if len(reasons) != len(want) || during.Rejections.Total != 5 {
		t.Errorf("rejections %v (total %d), want %v", reasons, during.Rejections.Total, want)
	}
	for k, v := range want {
		if reasons[k] != v {
			t.Errorf("rejections[%s] = %d, want %d", k, reasons[k], v)
		}
	}
	if len(during.Outcomes.Recent) != 0 {
		t.Errorf("outcomes before any ended: %+v", during.Outcomes.Recent)
	}

	tn.closeHold()
	for i := 0; i < 4; i++ {
		if r := <-held; r.status != http.StatusOK {
			t.Fatalf("held: %d", r.status)
		}
	}
	if r := tn.invoke("acme/echo/run", aliceToken, "trap"); r.status != http.StatusBadGateway {
		t.Fatalf("trap: %d", r.status)
	}
	tn.waitIdle()
	after, body := tn.status()
	if strings.Contains(string(body), "held-") || strings.Contains(string(body), "<b>") || strings.Contains(string(body), "no-such-route") {
		t.Errorf("the status shows a caller's string: %s", body)
	}
	if after.Live != 0 || after.scope("tenant", "acme")["live-activations"] != [2]uint64{0, 4} {
		t.Errorf("after release: live %d, acme %v", after.Live, after.scope("tenant", "acme"))
	}
	rec := after.Outcomes.Recent
	if len(rec) != 5 {
		t.Fatalf("%d outcomes, want 5: %+v", len(rec), rec)
	}
	if rec[0].Outcome != OutcomeTrap || rec[0].Status != http.StatusBadGateway {
		t.Errorf("the newest outcome %+v, want the trap", rec[0])
	}
	for i, o := range rec {
		if o.Tenant != "acme" || o.Service != "echo" || o.Route != "run" || o.DurationMS < 0 {
			t.Errorf("outcome %d: %+v", i, o)
		}
		if i > 0 && (o.Outcome != OutcomeSuccess || o.Status != http.StatusOK || o.AtUnixMS > rec[i-1].AtUnixMS) {
			t.Errorf("outcome %d: %+v, want a success no newer than the one before", i, o)
		}
	}
	if after.Rejections.Total != 5 {
		t.Errorf("rejections after: %d, want still 5", after.Rejections.Total)
	}
}

func TestStatusRingsAreBounded(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for i := 0; i < RecentOutcomes+7; i++ {
		if r := tn.invoke("acme/echo/run", aliceToken, "x"); r.status != http.StatusOK {
			t.Fatalf("invoke %d: %d", i, r.status)
		}
	}
	d, _ := tn.status()
	if len(d.Outcomes.Recent) != RecentOutcomes {
		t.Errorf("%d outcomes kept, want %d", len(d.Outcomes.Recent), RecentOutcomes)
	}

	// The rejection samples, over a clock of our own: one a second, never
	// more than the ring holds, and the window is the last minute.
	clock := time.Unix(1_000_000, 0)
	st := &statusState{n: tn.node, now: func() time.Time { return clock }}
	read := func() statusDoc {
		t.Helper()
		rec := httptest.NewRecorder()
		st.serveStatus(rec, httptest.NewRequest(http.MethodGet, "/v1/admin/status", nil))
		return decodeStatus(t, rec.Body.Bytes())
	}
	st.maybeSample(clock)
	for i := 0; i < 2; i++ {
		if r := tn.invoke("acme/echo/run", aliceToken, strings.Repeat("p", 3000)); r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("payload: %d", r.status)
		}
	}
	clock = clock.Add(30 * time.Second)
	if d := read(); d.Rejections.Total != 2 || d.Rejections.WindowMS != 30_000 {
		t.Errorf("30 s later: %d rejections over %d ms, want 2 over 30000", d.Rejections.Total, d.Rejections.WindowMS)
	}
	for i := 0; i < 300; i++ {
		clock = clock.Add(250 * time.Millisecond)
		st.maybeSample(clock)
		st.maybeSample(clock)
	}
	st.mu.Lock()
	n := st.numSample
	st.mu.Unlock()
	if n != rejectionSamples {
		t.Errorf("%d samples kept, want the ring's %d", n, rejectionSamples)
	}
	// The ring holds the samples of seconds 44 to 105: the window starts
	// at 45, the newest sample at least a minute old.
	if d := read(); d.Rejections.Total != 0 || d.Rejections.WindowMS != 60_000 {
		t.Errorf("105 s later: %d rejections over %d ms, want 0 over exactly a minute", d.Rejections.Total, d.Rejections.WindowMS)
	}
	if r := tn.invoke("acme/echo/run", aliceToken, strings.Repeat("p", 3000)); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("payload: %d", r.status)
	}
	if d := read(); d.Rejections.Total != 1 || len(d.Rejections.ByReason) != 1 || d.Rejections.ByReason[0].Reason != "payload-too-large" {
		t.Errorf("one more: %+v", d.Rejections)
	}
}
