package browsertest

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"latent.dev/admission/internal/shadow"
	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/policy"
)

type shadowPage struct {
	Charts  []chart  `json:"charts"`
	Titles  []string `json:"titles"` // every <svg>'s own <title>
	Heads   []string `json:"heads"`  // the sections' headings
	Summary string   `json:"summary"`
	Changes int      `json:"changes"`
	Fetched int      `json:"fetched"`
}

const readShadowJS = `(() => ({
  charts: Array.from(document.querySelectorAll("svg")).map(svg => {
    const r = svg.getBoundingClientRect();
    return {id: svg.id, width: r.width, height: r.height, marks: []};
  }),
  titles: Array.from(document.querySelectorAll("svg > title")).map(t => t.textContent),
  heads: Array.from(document.querySelectorAll("h2")).map(h => h.innerText.trim()),
  summary: document.getElementById("summary").innerText.trim(),
  changes: document.querySelectorAll("#changes-data tbody tr").length,
  fetched: performance.getEntriesByType("resource").length,
}))()`

// TestShadowReportInABrowser replays a recorded trace under a policy that
// lowers one tenant's live limit, writes the report and opens it.
func TestShadowReportInABrowser(t *testing.T) {
	browser := findBrowser(t)
	dir := t.TempDir()
	data, err := os.ReadFile("../../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := os.ReadFile("../../testdata/catalog/good.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := shadowtest.NewRecorder(recorded, cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := (shadowtest.Workload{Decisions: 2000, SampleEvery: 100, Seed: 1}).Run(rec); err != nil {
		t.Fatal(err)
	}
	tracePath := filepath.Join(dir, "trace.jsonl")
	if err := rec.Write(tracePath); err != nil {
		t.Fatal(err)
	}
	cand, _ := policy.DecodePolicy(data)
	cand.Tenants[0].Limits.MaxLiveActivations = 2
	res, err := shadow.Replay(shadow.Config{Policy: cand, Files: []string{tracePath}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed == 0 {
		t.Fatal("the lower limit changed nothing")
	}
	reportPath := filepath.Join(dir, "shadow.html")
	f, err := os.Create(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := shadow.WriteReport(f, res); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bctx := newBrowser(t, ctx, browser, dir)
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				problems = append(problems, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatalf("listening to the browser: %v", err)
	}
	if _, err := chromedp.Call(bctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enabling the log: %v", err)
	}
	u := url.URL{Scheme: "file", Path: reportPath}
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.String()),
		chromedp.WaitVisible(chromedp.CSS("#reasons-chart"))); err != nil {
		t.Fatalf("opening the report: %v", err)
	}
	pg, err := chromedp.Run(bctx, chromedp.Evaluate[shadowPage](readShadowJS))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	saveShot(t, dir, "shadow-report-1280.png", shot)

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page reported: %v", problems)
	}
	if pg.Fetched != 0 {
		t.Errorf("the page fetched %d resources", pg.Fetched)
	}
	if want := 1 + len(res.Series); len(pg.Charts) != want {
		t.Errorf("%d charts rendered, want %d", len(pg.Charts), want)
	}
	for _, c := range pg.Charts {
		if c.Width <= 0 || c.Height <= 0 {
			t.Errorf("chart %s rendered %vx%v", c.ID, c.Width, c.Height)
		}
	}
	titles := strings.Join(pg.Titles, "\n")
	for _, want := range []string{"Refusals by reason, recorded and under the candidate", "node: live activations against the limit",
		"tenant acme: live activations against the limit", "queue class batch: queued reservations against the limit"} {
		if !strings.Contains(titles, want) {
			t.Errorf("no chart titled %q; titles:\n%s", want, titles)
		}
	}
	if len(pg.Heads) < 3 || pg.Heads[0] != "Refusals by reason" || pg.Heads[len(pg.Heads)-1] != "Changed decisions" {
		t.Errorf("headings %q", pg.Heads)
	}
	if pg.Summary != res.Summary() {
		t.Errorf("summary %q, want %q", pg.Summary, res.Summary())
	}
	if pg.Changes != len(res.Changes) {
		t.Errorf("%d changed decisions shown, want %d", pg.Changes, len(res.Changes))
	}
}
