package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// findBrowser returns the path of a Chromium-like browser, or skips the
// test saying that none was found.
func findBrowser(t *testing.T) string {
	t.Helper()
	if fileExists("/usr/bin/chromium") {
		return "/usr/bin/chromium"
	}
	var tried []string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		tried = append(tried, name)
	}
	t.Skipf("no browser found (tried /usr/bin/chromium and %s on PATH): install Debian's chromium package, as .ci/run does, to run the browser checks",
		strings.Join(tried, ", "))
	return ""
}

// goCommand is the go command on PATH (.ci/run puts the toolchain's
// first).
func goCommand(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command: %v", err)
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// text is what the soak printed: its progress lines and its report.
type text struct {
	seed, workers, elapsed string
	admitted, rejected     string // "N (R/s)", as the report prints them
	seconds                [][3]string
	reasons                map[string]string
	percentiles            map[string]string
	samples, peak          string
	abandoned, reclaimed   string
	resources              map[string][2]string
	checks                 [][3]string // ok or FAIL, name, detail
	report                 string
}

var (
	progressLine = regexp.MustCompile(`(?m)^t=\s*(\d+)s admitted=\d+ \(\+(\d+)/s\) rejected=\d+ \(\+(\d+)/s\) `)
	headerLine   = regexp.MustCompile(`(?m)^soak: (\S+) with (\d+) workers, seed (\d+)$`)
	countLine    = regexp.MustCompile(`(?m)^admitted   (\d+ \(\d+/s\))\nrejected   (\d+ \(\d+/s\))$`)
	reasonLine   = regexp.MustCompile(`(?m)^  ([a-z-]+) +(\d+)$`)
	latencyLine  = regexp.MustCompile(`(?m)^admit latency p50 (\S+)  p99 (\S+)  p99\.9 (\S+)  \((\d+) samples\)$`)
	peakLine     = regexp.MustCompile(`(?m)^peak live reservations (\d+)$`)
	abandonLine  = regexp.MustCompile(`(?m)^abandoned permits (\d+), reclaimed by the GC (\d+)$`)
	resourceLine = regexp.MustCompile(`(goroutines|threads|descriptors|sockets|children) (\d+) -> (\d+)`)
	heapLine     = regexp.MustCompile(`(?m)^heap in use (\d+) KiB -> (\d+) KiB$`)
	checkLine    = regexp.MustCompile(`(?m)^  (ok  |FAIL) (.+) \((.*)\)$`)
)

func parseText(t *testing.T, out string) text {
	t.Helper()
	must := func(re *regexp.Regexp, s string) []string {
		t.Helper()
		m := re.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("the text report lacks %v:\n%s", re, out)
		}
		return m
	}
	i := strings.Index(out, "\nsoak: ")
	if i < 0 {
		t.Fatalf("no report in the soak's output:\n%s", out)
	}
	r := text{report: out[i:], reasons: map[string]string{}, resources: map[string][2]string{}}
	for _, m := range progressLine.FindAllStringSubmatch(out[:i], -1) {
		r.seconds = append(r.seconds, [3]string{m[1], m[2], m[3]})
	}
	m := must(headerLine, r.report)
	r.elapsed, r.workers, r.seed = m[1], m[2], m[3]
	m = must(countLine, r.report)
	r.admitted, r.rejected = m[1], m[2]
	for _, m := range reasonLine.FindAllStringSubmatch(r.report[strings.Index(r.report, "rejections by reason"):strings.Index(r.report, "admit latency")], -1) {
		r.reasons[m[1]] = m[2]
	}
	m = must(latencyLine, r.report)
	r.percentiles = map[string]string{"p50": m[1], "p99": m[2], "p99.9": m[3]}
	r.samples = m[4]
	r.peak = must(peakLine, r.report)[1]
	m = must(abandonLine, r.report)
	r.abandoned, r.reclaimed = m[1], m[2]
	res := r.report[strings.Index(r.report, "\ngoroutines ")+1:]
	for _, m := range resourceLine.FindAllStringSubmatch(res[:strings.Index(res, "\n")], -1) {
		r.resources[m[1]] = [2]string{m[2], m[3]}
	}
	m = must(heapLine, r.report)
	r.resources["heap in use (KiB)"] = [2]string{m[1], m[2]}
	for _, m := range checkLine.FindAllStringSubmatch(r.report[strings.Index(r.report, "invariants:"):], -1) {
		r.checks = append(r.checks, [3]string{strings.TrimSpace(m[1]), m[2], m[3]})
	}
	return r
}

// page is what the browser rendered, read back from the DOM by
// readPageJS: texts as the page shows them (innerText), chart marks with
// their data- attributes, their <title> texts and their rendered boxes.
type page struct {
	Summary     map[string]string `json:"summary"`
	Charts      []chart           `json:"charts"`
	Seconds     [][]string        `json:"seconds"` // the per-second table's cells
	Percentiles map[string]string `json:"percentiles"`
	Samples     string            `json:"samples"`
	Markers     []string          `json:"markers"`
	Reasons     [][]string        `json:"reasons"`
	Live        [][]string        `json:"live"`
	Resources   [][]string        `json:"resources"`
	Invariants  [][]string        `json:"invariants"`
	Verdict     string            `json:"verdict"`
	Report      string            `json:"report"`
	Fetched     int               `json:"fetched"` // resources the page loaded: none
	ScrollWidth float64           `json:"scrollWidth"`
	Viewport    float64           `json:"viewport"`
}

type chart struct {
	ID     string  `json:"id"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	Marks  []mark  `json:"marks"`
}

type mark struct {
	Series string  `json:"series"`
	Label  string  `json:"label"`
	X      string  `json:"x"`
	Value  string  `json:"value"`
	Count  string  `json:"count"`
	Title  string  `json:"title"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	CY     float64 `json:"cy"` // the rendered center's y
}

const readPageJS = `(() => {
  const text = (e) => e ? e.innerText.trim() : "";
  const cells = (sel) => Array.from(document.querySelectorAll(sel)).map(tr => Array.from(tr.cells).map(td => td.innerText.trim()));
  const summary = {};
  for (const id of ["elapsed", "workers", "seed", "admitted", "rejected", "abandoned"]) summary[id] = text(document.getElementById(id));
  const charts = Array.from(document.querySelectorAll("svg.chart")).map(svg => {
    const r = svg.getBoundingClientRect();
    const marks = Array.from(svg.querySelectorAll(".mark")).map(m => {
      const b = m.getBoundingClientRect();
      const t = m.querySelector("title");
      return {series: m.dataset.series || "", label: m.dataset.label || "", x: m.dataset.x || "", value: m.dataset.value || "",
        count: m.dataset.count || "", title: t ? t.textContent : "", width: b.width, height: b.height, cy: b.top + b.height / 2};
    });
    return {id: svg.id, width: r.width, height: r.height, marks};
  });
  const pct = {};
  for (const td of document.querySelectorAll("#latency-percentiles td[data-quantile]")) pct[td.dataset.quantile] = text(td);
  return {
    summary, charts,
    seconds: cells("#throughput-data tbody tr"),
    percentiles: pct,
    samples: text(document.querySelector("#latency-percentiles td[data-samples]")),
    markers: Array.from(document.querySelectorAll("#latency-chart text.marker")).map(e => e.textContent),
    reasons: cells("#rejections-data tbody tr"),
    live: cells("#peak-live-data tbody tr"),
    resources: cells("#resources-data tbody tr"),
    invariants: cells("#invariants-data tbody tr"),
    verdict: text(document.getElementById("verdict")),
    report: document.getElementById("text-report").innerText,
    fetched: performance.getEntriesByType("resource").length,
    scrollWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
})()`

func TestSoakReportInABrowser(t *testing.T) {
	browser := findBrowser(t)
	dir := t.TempDir()
	reportPath := filepath.Join(dir, "report.html")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	begin := time.Now()
	soak := exec.CommandContext(ctx, goCommand(t), "run", "./cmd/stress", "-duration", "5s", "-seed", "42", "-report", reportPath)
	soak.Dir = filepath.Join("..", "..") // the repository root
	var stdout, stderr bytes.Buffer
	soak.Stdout, soak.Stderr = &stdout, &stderr
	if err := soak.Run(); err != nil {
		t.Fatalf("the soak: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("the soak (with its build) took %v", time.Since(begin).Round(time.Millisecond))
	txt := parseText(t, stdout.String())
	if len(txt.seconds) != 5 || len(txt.reasons) < 5 || len(txt.checks) < 4 {
		t.Fatalf("the text report parsed to too little: %+v\n%s", txt, stdout.String())
	}

	bctx := newBrowser(t, ctx, browser, dir)

	u := url.URL{Scheme: "file", Path: reportPath}
	var wide, narrow page
	var shotWide, shotNarrow []byte
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("the browser, %s: %v", what, err)
		}
	}
	step("opening the report", chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.String()),
		chromedp.WaitVisible(chromedp.CSS("#throughput-chart"))))
	shotWide, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("the screenshot at 1280x800", err)
	// The tables under <details> are read open, as a reader would.
	step("opening the details", chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("details").forEach(d => d.open = true)`)))
	wide, err = chromedp.Run(bctx, chromedp.Evaluate[page](readPageJS))
	step("reading the page at 1280x800", err)
	step("the phone's viewport", chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("details").forEach(d => d.open = false)`),
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Sleep(100*time.Millisecond))) // a layout after the resize
	narrow, err = chromedp.Run(bctx, chromedp.Evaluate[page](readPageJS))
	step("reading the page at 390x844", err)
	shotNarrow, err = chromedp.Run(bctx, chromedp.FullScreenshot(100))
	step("the screenshot at 390x844", err)
	saveShot(t, dir, "soak-report-1280.png", shotWide)
	saveShot(t, dir, "soak-report-390.png", shotNarrow)

	checkRendered(t, wide, txt)
	for _, p := range []struct {
		name string
		pg   page
		w    float64
	}{{"1280x800", wide, 1280}, {"390x844", narrow, 390}} {
		if p.pg.Viewport != p.w {
			t.Errorf("%s: the viewport is %v wide", p.name, p.pg.Viewport)
		}
		if p.pg.ScrollWidth > p.w {
			t.Errorf("%s: the page is %v wide, so it scrolls sideways", p.name, p.pg.ScrollWidth)
		}
		if p.pg.Fetched != 0 {
			t.Errorf("%s: the page fetched %d resources", p.name, p.pg.Fetched)
		}
		for _, c := range p.pg.Charts {
			if c.Width <= 0 || c.Height <= 0 || c.Width > p.w {
				t.Errorf("%s: chart %s rendered %vx%v", p.name, c.ID, c.Width, c.Height)
			}
		}
	}
	if time.Since(begin) > time.Minute {
		t.Logf("the browser check took %v, more than the minute it should", time.Since(begin).Round(time.Second))
	}
}

// saveShot writes a screenshot under dir, logs its path, and copies it to
// $LATENT_ARTIFACTS (or else $OUT) when set.
func saveShot(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG", name)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d KiB)", p, len(png)>>10)
	for _, env := range []string{"LATENT_ARTIFACTS", "OUT"} {
		if to := os.Getenv(env); to != "" {
			if err := os.MkdirAll(to, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, name), png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot copied to %s", filepath.Join(to, name))
			break
		}
	}
}

// checkRendered holds what the browser rendered against the text report.
func checkRendered(t *testing.T, pg page, txt text) {
	t.Helper()
	eq := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the page shows %v, the text report says %v", what, got, want)
		}
	}
	eq("seed", pg.Summary["seed"], txt.seed)
	eq("workers", pg.Summary["workers"], txt.workers)
	eq("elapsed", pg.Summary["elapsed"], txt.elapsed)
	eq("admitted", pg.Summary["admitted"], txt.admitted)
	eq("rejected", pg.Summary["rejected"], txt.rejected)
	eq("abandoned / reclaimed", pg.Summary["abandoned"], txt.abandoned+" / "+txt.reclaimed)

	charts := map[string]chart{}
	for _, c := range pg.Charts {
		charts[c.ID] = c
	}
	for _, id := range []string{"throughput-chart", "latency-chart", "rejections-chart", "peak-live-chart", "resources-chart"} {
		if _, ok := charts[id]; !ok {
			t.Fatalf("no chart %s rendered; charts: %v", id, pg.Charts)
		}
	}

	// Per second: the points' titles and the table.
	var points, rows [][3]string
	at := map[string]map[string]mark{}
	for _, m := range charts["throughput-chart"].Marks {
		if at[m.X] == nil {
			at[m.X] = map[string]mark{}
		}
		at[m.X][m.Series] = m
		if want := fmt.Sprintf("%s at %ss: %s", m.Series, m.X, m.Value); m.Title != want {
			t.Errorf("point title %q, want %q", m.Title, want)
		}
	}
	for _, s := range txt.seconds {
		points = append(points, [3]string{s[0], at[s[0]]["admitted"].Value, at[s[0]]["rejected"].Value})
	}
	eq("the per-second chart", points, txt.seconds)
	for _, r := range pg.Seconds {
		if len(r) == 4 {
			rows = append(rows, [3]string{strings.TrimSuffix(r[0], "s"), r[1], r[2]})
		}
	}
	eq("the per-second table", rows, txt.seconds)
	// A count larger by more than a pixel's worth is drawn higher.
	ms := charts["throughput-chart"].Marks
	var vmax float64
	for _, m := range ms {
		vmax = math.Max(vmax, atof(m.Value))
	}
	for _, a := range ms {
		for _, b := range ms {
			va, vb := atof(a.Value), atof(b.Value)
			if va-vb > vmax/100 && !(a.CY < b.CY) {
				t.Errorf("%s at %s (%v) is drawn at y=%v, not above %s at %s (%v) at y=%v", a.Series, a.X, va, a.CY, b.Series, b.X, vb, b.CY)
			}
		}
	}

	// Latency: the markers, the percentile table, and buckets that hold
	// every sample.
	var markers []string
	for _, q := range []string{"p50", "p99", "p99.9"} {
		markers = append(markers, q+" "+txt.percentiles[q])
	}
	eq("the histogram's markers", pg.Markers, markers)
	eq("the percentile table", pg.Percentiles, txt.percentiles)
	eq("the sample count", pg.Samples, txt.samples)
	var total uint64
	for _, m := range charts["latency-chart"].Marks {
		n, err := strconv.ParseUint(m.Count, 10, 64)
		if err != nil || !strings.HasSuffix(m.Title, ": "+m.Count) {
			t.Errorf("histogram bar: count %q, title %q", m.Count, m.Title)
		}
		if n > 0 && (m.Height <= 0 || m.Width <= 0) {
			t.Errorf("a bucket of %d samples rendered %vx%v", n, m.Width, m.Height)
		}
		total += n
	}
	eq("the histogram's samples", strconv.FormatUint(total, 10), txt.samples)

	// Rejections by reason: the bars, with widths in proportion, and the
	// table.
	bars := map[string]string{}
	var widest mark
	for _, m := range charts["rejections-chart"].Marks {
		bars[m.Label] = m.Value
		if m.Title != m.Label+": "+m.Value {
			t.Errorf("bar title %q", m.Title)
		}
		if v, w := atof(m.Value), atof(widest.Value); v > w {
			widest = m
		}
	}
	eq("the rejection bars", bars, txt.reasons)
	for _, m := range charts["rejections-chart"].Marks {
		want := widest.Width * atof(m.Value) / atof(widest.Value)
		if math.Abs(m.Width-want) > 1.5 {
			t.Errorf("the %s bar is %vpx wide, want %vpx (%s against %s at %vpx)", m.Label, m.Width, want, m.Value, widest.Value, widest.Width)
		}
	}
	table := map[string]string{}
	for _, r := range pg.Reasons {
		table[r[0]] = r[1]
	}
	eq("the rejection table", table, txt.reasons)

	// Peak live reservations against the limits.
	live := map[string]string{}
	for _, m := range charts["peak-live-chart"].Marks {
		live[m.Label] = m.Value
	}
	eq("the peak live bar", live["peak live reservations"], txt.peak)
	if len(live) < 2 {
		t.Errorf("no limit drawn beside the peak: %v", live)
	}
	eq("the peak live table", pg.Live[0][:2], []string{"peak live reservations", txt.peak})

	// Resources before and after, each judged by its invariant's mark.
	okOf := map[string]bool{}
	for _, c := range txt.checks {
		okOf[c[1]] = c[0] == "ok"
	}
	res := map[string][2]string{}
	for _, r := range pg.Resources {
		res[r[0]] = [2]string{r[1], r[2]}
		if r[0] == "heap in use (KiB)" {
			continue
		}
		check := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(r[3], "✓ pass"), "✗ FAIL"))
		ok, known := okOf[check]
		if !known {
			t.Errorf("resource %s is judged by %q, which the text report does not list", r[0], check)
		}
		if ok != strings.HasPrefix(r[3], "✓ pass") || ok == strings.HasPrefix(r[3], "✗ FAIL") {
			t.Errorf("resource %s shows %q, the text report says ok=%v", r[0], r[3], ok)
		}
	}
	eq("the resource table", res, txt.resources)
	drawn := map[string][2]string{}
	for _, m := range charts["resources-chart"].Marks {
		v := drawn[m.Label]
		v[map[string]int{"before": 0, "after": 1}[m.Series]] = m.Value
		drawn[m.Label] = v
	}
	drawn["heap in use (KiB)"] = txt.resources["heap in use (KiB)"]
	eq("the resource bars", drawn, txt.resources)

	// Invariants, each with its mark, and the verdict.
	var checks [][3]string
	allOK := true
	for _, r := range pg.Invariants {
		mark := map[string]string{"✓ pass": "ok", "✗ FAIL": "FAIL"}[r[0]]
		checks = append(checks, [3]string{mark, r[1], r[2]})
	}
	for _, c := range txt.checks {
		allOK = allOK && c[0] == "ok"
	}
	eq("the invariants", checks, txt.checks)
	if allOK != strings.HasPrefix(pg.Verdict, "✓ pass") {
		t.Errorf("verdict %q, but every invariant held is %v", pg.Verdict, allOK)
	}
	eq("the text report", strings.TrimSpace(pg.Report), strings.TrimSpace(txt.report))
}

func atof(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
