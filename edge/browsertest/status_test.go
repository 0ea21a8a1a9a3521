package browsertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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

	"github.com/chromedp/chromedp"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/edge/latentd"
	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

const (
	statusAdminToken = "status-admin-secret-0123456789"
	statusAliceToken = "status-alice-secret-0123456789"
)

// holdGuests is a latentd.Guests over the synthetic backend: an input of
// "hold" runs until hold is closed, anything else echoes at once.
type holdGuests struct {
	backend *synthetic.Backend
	hold    chan struct{}
	started chan struct{}
}

func newHoldGuests() *holdGuests {
	g := &holdGuests{hold: make(chan struct{}), started: make(chan struct{}, 64)}
	g.backend = synthetic.New(func(guest *runner.Guest) synthetic.Behavior {
		if string(guest.Input) == "hold" {
			return synthetic.Behavior{Hold: g.hold, Started: func() { g.started <- struct{}{} }}
		}
		return synthetic.Behavior{Output: []byte("ok")}
	})
	return g
}

func (g *holdGuests) Backends() map[string]runner.Backend {
	return map[string]runner.Backend{"wasm": g.backend}
}
func (g *holdGuests) Prepare(context.Context, catalog.Deployment) (latentd.Prepared, error) {
	return nopPrepared{}, nil
}
func (g *holdGuests) Undeploy(string, string) {}
func (g *holdGuests) Hold(string, string, string) (func(), bool) {
	return func() {}, true
}

// nopPrepared is a deployment that holdGuests made ready: nothing.
type nopPrepared struct{}

func (nopPrepared) Commit() (latentd.Prepared, error) { return nopPrepared{}, nil }
func (nopPrepared) Discard()                          {}
func (g *holdGuests) PutArtifact(string, io.Reader) error {
	return errors.New("no uploads in this test")
}
func (g *holdGuests) Close(context.Context) error { return nil }

// seen is one request as the server saw it.
type seen struct {
	method, uri, authorization, referer string
}

// requestLog records every request the node's server sees.
type requestLog struct {
	mu   sync.Mutex
	list []seen
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.list = append(l.list, seen{r.Method, r.RequestURI, r.Header.Get("Authorization"), r.Header.Get("Referer")})
		l.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

func (l *requestLog) all() []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seen(nil), l.list...)
}

func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// statusNode starts a latentd over edge/latentd's test policy and catalog
// on 127.0.0.1:0, behind the request log; the cleanup shuts it down.
func statusNode(t *testing.T, log *requestLog) (*latentd.Node, *holdGuests, string) {
	t.Helper()
	testdata := filepath.Join("..", "latentd", "testdata")
	data, err := os.ReadFile(filepath.Join(testdata, "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	// The held invocations wait while the browser draws and takes its
	// screenshots, which a loaded machine can stretch past the policy's
	// five seconds: their grant must outlast the page's checks.
	pol.Node.BudgetCeiling.WallTime = 10 * time.Minute
	if data, err = os.ReadFile(filepath.Join(testdata, "catalog.json")); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.DecodeCatalogFile(data, true)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := latentd.DecodeTokens([]byte(`{"tokens":[
 {"sha256":"` + tokenDigest(statusAliceToken) + `","kind":"user","subject":"alice","tenant":"acme"},
 {"sha256":"` + tokenDigest(statusAdminToken) + `","admin":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	guests := newHoldGuests()
	calm := filepath.Join(testdata, "load", "calm")
	n, err := latentd.New(latentd.Config{Policy: pol, Deployments: cat.Deployments, Tokens: tokens, Guests: guests,
		Load: loadsampler.Files{Proc: filepath.Join(calm, "proc")}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: log.wrap(n.Handler()), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		select {
		case <-guests.hold:
		default:
			close(guests.hold)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		if err := n.Shutdown(ctx); err != nil {
			t.Errorf("node shutdown: %v", err)
		}
	})
	return n, guests, "http://" + l.Addr().String()
}

// statusRow is one bar as the page rendered it.
type statusRow struct {
	Kind      string  `json:"kind"`
	Name      string  `json:"name"`
	Dimension string  `json:"dimension"`
	Value     string  `json:"value"`
	Max       string  `json:"max"`
	Full      string  `json:"full"`
	Text      string  `json:"text"`
	Fill      float64 `json:"fill"`
	BarWidth  float64 `json:"barWidth"`
}

type statusPage struct {
	Refreshes   int         `json:"refreshes"`
	Refused     string      `json:"refused"`
	State       string      `json:"state"`
	Href        string      `json:"href"`
	Rows        []statusRow `json:"rows"`
	Outcomes    []string    `json:"outcomes"`
	Text        string      `json:"text"`
	ScrollWidth float64     `json:"scrollWidth"`
	Viewport    float64     `json:"viewport"`
}

const readStatusJS = `(() => {
  const rows = [];
  document.querySelectorAll("#scopes .scope").forEach(card => {
    card.querySelectorAll(".row").forEach(r => {
      const fill = r.querySelector("rect.fill");
      rows.push({kind: card.dataset.kind, name: card.dataset.name, dimension: r.dataset.dimension,
        value: r.dataset.value, max: r.dataset.max, full: r.dataset.full,
        text: r.querySelector(".nums").textContent,
        fill: parseFloat(fill.getAttribute("width")), barWidth: r.querySelector("svg").getBoundingClientRect().width});
    });
  });
  return {
    refreshes: parseInt(document.body.dataset.refreshes || "0", 10),
    refused: document.body.dataset.refused || "",
    state: document.getElementById("state").textContent,
    href: location.href,
    rows: rows,
    outcomes: Array.from(document.querySelectorAll("#outcomes tbody tr[data-outcome]")).map(tr => tr.innerText.replace(/\s+/g, " ")),
    text: document.body.innerText,
    scrollWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
})()`

// count formats like the page: en-US digit grouping.
func count(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// checkBars holds every rendered bar against the node's Usage: the exact
// numbers in the row's data, the live and queued counts as the text shows
// them, and the bar's fill as the fraction.
func checkBars(t *testing.T, when string, pg statusPage, u core.Usage) {
	t.Helper()
	want := map[string][2]uint64{}
	add := func(kind, name string, s core.ScopeUsage) {
		want[kind+"/"+name+"/live-activations"] = [2]uint64{s.Live, s.Limits.MaxLiveActivations}
		want[kind+"/"+name+"/queued-reservations"] = [2]uint64{s.Queued, s.Limits.MaxQueuedReservations}
		want[kind+"/"+name+"/cpu-fuel"] = [2]uint64{s.CPUFuel, s.Limits.MaxReservedCPUFuel}
		want[kind+"/"+name+"/memory-bytes"] = [2]uint64{s.MemoryBytes, s.Limits.MaxReservedMemoryBytes}
	}
	add("node", "node", u.Node)
	for _, s := range u.Tenants {
		add("tenant", s.Name, s)
	}
	for _, s := range u.TrustClasses {
		add("trust-class", s.Name, s)
	}
	if len(pg.Rows) != len(want) {
		t.Errorf("%s: the page shows %d bars, the node has %d scope dimensions", when, len(pg.Rows), len(want))
	}
	for _, r := range pg.Rows {
		key := r.Kind + "/" + r.Name + "/" + r.Dimension
		w, ok := want[key]
		if !ok {
			t.Errorf("%s: a bar for %s, which the node does not have", when, key)
			continue
		}
		if r.Value != fmt.Sprint(w[0]) || r.Max != fmt.Sprint(w[1]) {
			t.Errorf("%s: %s shows %s of %s, Usage says %d of %d", when, key, r.Value, r.Max, w[0], w[1])
		}
		if r.Dimension == "live-activations" || r.Dimension == "queued-reservations" || r.Dimension == "cpu-fuel" {
			if text := count(w[0]) + " / " + count(w[1]); r.Text != text {
				t.Errorf("%s: %s reads %q, want %q", when, key, r.Text, text)
			}
		}
		frac := 0.0
		if w[1] > 0 {
			frac = min(1, float64(w[0])/float64(w[1]))
		}
		if d := r.Fill - frac*1000; d > 0.1 || d < -0.1 {
			t.Errorf("%s: %s's bar is filled %.1f/1000, want %.1f", when, key, r.Fill, frac*1000)
		}
		if r.Full != fmt.Sprint(w[1] > 0 && w[0] >= w[1]) {
			t.Errorf("%s: %s full=%s", when, key, r.Full)
		}
		if r.BarWidth <= 0 {
			t.Errorf("%s: %s's bar is not drawn", when, key)
		}
	}
}

func findRow(pg statusPage, kind, name, dim string) (statusRow, bool) {
	for _, r := range pg.Rows {
		if r.Kind == kind && r.Name == name && r.Dimension == dim {
			return r, true
		}
	}
	return statusRow{}, false
}

func TestStatusPageInABrowser(t *testing.T) {
	browser := findBrowser(t)
	dir := t.TempDir()
	var log requestLog
	n, guests, base := statusNode(t, &log)

	// acme is pushed to its live limit of 4 (and a fifth is refused).
	client := &http.Client{Timeout: 30 * time.Second}
	invoke := func(path, token, body string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/invoke/"+path, strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	type answer struct {
		status int
		err    error
	}
	held := make(chan answer, 4)
	for i := 0; i < 4; i++ {
		go func() { s, err := invoke("acme/echo/run", statusAliceToken, "hold"); held <- answer{s, err} }()
	}
	for i := 0; i < 4; i++ {
		select {
		case <-guests.started:
		case <-time.After(2 * time.Minute): // only a hang: a loaded machine is slow
			t.Fatal("the held guests did not start")
		}
	}
	if s, err := invoke("acme/echo/run", statusAliceToken, "x"); err != nil || s != http.StatusTooManyRequests {
		t.Fatalf("a fifth acme invocation: %d %v, want 429", s, err)
	}
	if u := n.Provider().Usage(); u.Tenants[0].Name != "acme" || u.Tenants[0].Live != 4 {
		t.Fatalf("acme is not at its limit: %+v", u.Tenants[0])
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := newBrowser(t, ctx, browser, dir)
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("the browser, %s: %v", what, err)
		}
	}
	read := func(what string) statusPage {
		t.Helper()
		pg, err := chromedp.Run(bctx, chromedp.Evaluate[statusPage](readStatusJS))
		step(what, err)
		return pg
	}
	waitRefreshes := func(what string, atLeast int) {
		t.Helper()
		_, err := chromedp.Run(bctx, chromedp.Poll[bool](fmt.Sprintf(`parseInt(document.body.dataset.refreshes || "0", 10) >= %d`, atLeast),
			chromedp.WithPollingTimeout(15*time.Second)))
		step(what, err)
	}

	step("opening the page", chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(base+"/status#token="+statusAdminToken),
		chromedp.WaitVisible(chromedp.CSS("#state"))))
	waitRefreshes("the first refresh", 1)
	first := read("reading the first refresh")
	uFull := n.Provider().Usage()
	if first.Refreshes > 2 {
		t.Logf("read at refresh %d", first.Refreshes)
	}
	checkBars(t, "held", first, uFull)
	acme, ok := findRow(first, "tenant", "acme", "live-activations")
	if !ok || acme.Full != "true" || acme.Text != "4 / 4" || acme.Fill != 1000 {
		t.Errorf("acme at its live limit shows %+v, want a full bar of 4 / 4", acme)
	}
	if globex, _ := findRow(first, "tenant", "globex", "live-activations"); globex.Text != "0 / 8" || globex.Full != "false" {
		t.Errorf("globex shows %+v", globex)
	}
	if strings.Contains(first.Href, statusAdminToken) {
		t.Errorf("the token stayed in the address bar: %s", first.Href)
	}
	for _, want := range []string{"capacity-exhausted", "sample #", "Recent executions"} {
		if !strings.Contains(first.Text, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	shotWide, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("the screenshot at 1280x800", err)
	saveShot(t, dir, "status-1280.png", shotWide)
	if first.ScrollWidth > first.Viewport {
		t.Errorf("1280x800: the page is %v wide, so it scrolls sideways", first.ScrollWidth)
	}
	step("the phone's viewport", chromedp.Do(bctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)))
	waitRefreshes("a refresh at 390x844", first.Refreshes+1)
	narrow := read("reading the page at 390x844")
	if narrow.ScrollWidth > narrow.Viewport || narrow.Viewport != 390 {
		t.Errorf("390x844: the page is %v wide in a viewport of %v", narrow.ScrollWidth, narrow.Viewport)
	}
	shotNarrow, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("the screenshot at 390x844", err)
	saveShot(t, dir, "status-390.png", shotNarrow)
	step("back to 1280x800", chromedp.Do(bctx, chromedp.EmulateViewport(1280, 800)))

	// Release: within two refreshes of the node being idle, acme's bar is
	// empty and the four executions are listed.
	close(guests.hold)
	for i := 0; i < 4; i++ {
		if a := <-held; a.err != nil || a.status != http.StatusOK {
			t.Fatalf("a held invocation: %d %v", a.status, a.err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute) // only a hang: a loaded machine is slow
	for n.Provider().LiveReservations() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the node did not become idle")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r0 := read("reading before the refreshes after release").Refreshes
	waitRefreshes("two refreshes after release", r0+2)
	released := read("reading after release")
	checkBars(t, "released", released, n.Provider().Usage())
	if acme, _ := findRow(released, "tenant", "acme", "live-activations"); acme.Full != "false" || acme.Text != "0 / 4" || acme.Fill != 0 {
		t.Errorf("acme after release shows %+v, want an empty bar of 0 / 4", acme)
	}
	successes := 0
	for _, o := range released.Outcomes {
		if strings.Contains(o, "acme/echo/run success 200") {
			successes++
		}
	}
	if successes != 4 {
		t.Errorf("the page lists %d acme/echo/run successes, want 4: %q", successes, released.Outcomes)
	}
	shotReleased, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("the screenshot after release", err)
	saveShot(t, dir, "status-released-1280.png", shotReleased)

	// A tenant's token gets the refusal and no data.
	step("opening the page with a tenant's token", chromedp.Do(bctx,
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(base+"/status#token="+statusAliceToken),
		chromedp.WaitVisible(chromedp.CSS("#state"))))
	_, err = chromedp.Run(bctx, chromedp.Poll[bool](`document.body.dataset.refused === "403"`, chromedp.WithPollingTimeout(15*time.Second)))
	step("the refusal", err)
	refused := read("reading the refused page")
	if len(refused.Rows) != 0 || len(refused.Outcomes) != 0 {
		t.Errorf("a tenant's token sees %d bars and %d outcomes", len(refused.Rows), len(refused.Outcomes))
	}
	for _, data := range []string{"acme", "globex", "standard", "live-activations", "capacity-exhausted"} {
		if strings.Contains(refused.Text, data) {
			t.Errorf("a tenant's token sees %q:\n%s", data, refused.Text)
		}
	}
	if !strings.Contains(refused.State, "403") {
		t.Errorf("the refused page says %q", refused.State)
	}

	// What the server saw: the JSON was fetched with the token as a
	// bearer header, and no URL or Referer ever held a token.
	var statusFetches, adminFetches, aliceFetches int
	for _, s := range log.all() {
		for _, tok := range []string{statusAdminToken, statusAliceToken} {
			if strings.Contains(s.uri, tok) || strings.Contains(s.referer, tok) {
				t.Errorf("the server saw a token in %s %s (Referer %q)", s.method, s.uri, s.referer)
			}
		}
		if s.uri == "/v1/admin/status" {
			statusFetches++
			switch s.authorization {
			case "Bearer " + statusAdminToken:
				adminFetches++
			case "Bearer " + statusAliceToken:
				aliceFetches++
			default:
				t.Errorf("a status fetch carried Authorization %q", s.authorization)
			}
		}
		if (s.uri == "/status" || s.uri == "/status.js" || s.uri == "/status.css") && s.authorization != "" {
			t.Errorf("the static %s was fetched with a token", s.uri)
		}
	}
	if adminFetches < released.Refreshes || aliceFetches != 1 {
		t.Errorf("status fetches: %d with the administrator's token (the page refreshed %d times), %d with alice's (want 1)",
			adminFetches, released.Refreshes, aliceFetches)
	}
	t.Logf("the server saw %d requests, %d of them status fetches", len(log.all()), statusFetches)
}
