package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// node is an element of the parsed page.
type node struct {
	name     string
	attrs    map[string]string
	children []*node
	text     strings.Builder // all the text inside it
}

func (n *node) attr(k string) string { return n.attrs[k] }

// all returns every element under n (n included) that pred accepts, in
// document order.
func (n *node) all(pred func(*node) bool) []*node {
	var out []*node
	var walk func(*node)
	walk = func(m *node) {
		if pred(m) {
			out = append(out, m)
		}
		for _, c := range m.children {
			walk(c)
		}
	}
	walk(n)
	return out
}

func (n *node) byID(t *testing.T, id string) *node {
	t.Helper()
	found := n.all(func(m *node) bool { return m.attr("id") == id })
	if len(found) != 1 {
		t.Fatalf("%d elements with id %q, want 1", len(found), id)
	}
	return found[0]
}

// withAttr returns the elements under n that have attribute k.
func (n *node) withAttr(k string) []*node {
	return n.all(func(m *node) bool { _, ok := m.attrs[k]; return ok })
}

// parsePage parses the page as strict XML: every element closed and
// nested, every attribute quoted, every & and < escaped. It is stricter
// than HTML, so a page that passes is well-formed HTML too.
func parsePage(t *testing.T, page []byte) *node {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	var root *node
	var stack []*node
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the page is not well-formed: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			n := &node{name: tk.Name.Local, attrs: map[string]string{}}
			for _, a := range tk.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				if root != nil {
					t.Fatalf("a second root element <%s>", n.name)
				}
				root = n
			} else {
				stack[len(stack)-1].children = append(stack[len(stack)-1].children, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for _, n := range stack {
				n.text.Write(tk)
			}
		}
	}
	if root == nil || root.name != "html" {
		t.Fatalf("the page's root is not <html>")
	}
	return root
}

// textReport is what the text report and the progress lines said.
type textReport struct {
	seed, workers, elapsed     string
	admitted, rejected         string
	admittedRate, rejectedRate string
	seconds                    [][4]string // tick, admitted, rejected, live
	reasons                    map[string]string
	p50, p99, p999, samples    string
	peak, abandoned, reclaimed string
	resources                  map[string][2]string
	heapBefore, heapAfter      string
	checks                     [][3]string // mark, name, detail
	text                       string      // from "soak:" to the end
}

var (
	progressLine = regexp.MustCompile(`(?m)^t=\s*(\d+)s admitted=\d+ \(\+(\d+)/s\) rejected=\d+ \(\+(\d+)/s\) live=(\d+) `)
	headerLine   = regexp.MustCompile(`(?m)^soak: (\S+) with (\d+) workers, seed (\d+)$`)
	countLine    = regexp.MustCompile(`(?m)^admitted   (\d+) \((\d+)/s\)\nrejected   (\d+) \((\d+)/s\)$`)
	reasonLine   = regexp.MustCompile(`(?m)^  ([a-z-]+) +(\d+)$`)
	latencyLine  = regexp.MustCompile(`(?m)^admit latency p50 (\S+)  p99 (\S+)  p99\.9 (\S+)  \((\d+) samples\)$`)
	peakLine     = regexp.MustCompile(`(?m)^peak live reservations (\d+)$`)
	abandonLine  = regexp.MustCompile(`(?m)^abandoned permits (\d+), reclaimed by the GC (\d+)$`)
	resourceLine = regexp.MustCompile(`(goroutines|threads|descriptors|sockets|children) (\d+) -> (\d+)`)
	heapLine     = regexp.MustCompile(`(?m)^heap in use (\d+) KiB -> (\d+) KiB$`)
	checkLine    = regexp.MustCompile(`(?m)^  (ok  |FAIL) (.+) \((.*)\)$`)
)

// parseText reads the numbers back out of the soak's standard output.
func parseText(t *testing.T, out string) textReport {
	t.Helper()
	var r textReport
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
		t.Fatalf("no report in:\n%s", out)
	}
	r.text = out[i:]
	for _, m := range progressLine.FindAllStringSubmatch(out[:i], -1) {
		r.seconds = append(r.seconds, [4]string{m[1], m[2], m[3], m[4]})
	}
	m := must(headerLine, r.text)
	r.elapsed, r.workers, r.seed = m[1], m[2], m[3]
	m = must(countLine, r.text)
	r.admitted, r.admittedRate, r.rejected, r.rejectedRate = m[1], m[2], m[3], m[4]
	reasons := r.text[strings.Index(r.text, "rejections by reason"):strings.Index(r.text, "admit latency")]
	r.reasons = map[string]string{}
	for _, m := range reasonLine.FindAllStringSubmatch(reasons, -1) {
		r.reasons[m[1]] = m[2]
	}
	m = must(latencyLine, r.text)
	r.p50, r.p99, r.p999, r.samples = m[1], m[2], m[3], m[4]
	r.peak = must(peakLine, r.text)[1]
	m = must(abandonLine, r.text)
	r.abandoned, r.reclaimed = m[1], m[2]
	resLine := r.text[strings.Index(r.text, "\ngoroutines "):]
	resLine = resLine[:strings.Index(resLine[1:], "\n")+1]
	r.resources = map[string][2]string{}
	for _, m := range resourceLine.FindAllStringSubmatch(resLine, -1) {
		r.resources[m[1]] = [2]string{m[2], m[3]}
	}
	m = must(heapLine, r.text)
	r.heapBefore, r.heapAfter = m[1], m[2]
	for _, m := range checkLine.FindAllStringSubmatch(r.text[strings.Index(r.text, "invariants:"):], -1) {
		r.checks = append(r.checks, [3]string{strings.TrimSpace(m[1]), m[2], m[3]})
	}
	return r
}

func TestReportPageHoldsTheTextReportsNumbers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.html")
	var out, errOut bytes.Buffer
	code := run([]string{"-duration", "2s", "-workers", "4", "-seed", "11", "-report", path}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	txt := parseText(t, out.String())
	if len(txt.seconds) != 2 || len(txt.reasons) < 5 || len(txt.checks) < 4 || len(txt.resources) != 5 {
		t.Fatalf("the text report parsed to too little: %+v", txt)
	}
	checkSelfContained(t, page)
	doc := parsePage(t, page)
	checkPage(t, doc, txt)
}

// checkSelfContained fails on anything that would make a browser fetch.
func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	lower := strings.ToLower(string(page))
	for _, bad := range []string{"http://", "https://", "<script", "<link", " src=", " href=", "url(", "@import", "<iframe", "<object", "<embed", "<img"} {
		if strings.Contains(lower, bad) {
			i := strings.Index(lower, bad)
			t.Errorf("the page contains %q: ...%s...", bad, lower[max(0, i-60):min(len(lower), i+60)])
		}
	}
}

// checkPage holds every chart and table of the page against the text
// report.
func checkPage(t *testing.T, doc *node, txt textReport) {
	t.Helper()
	eq := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: page %q, text report %q", what, got, want)
		}
	}
	eq("seed", doc.byID(t, "seed").attr("data-value"), txt.seed)
	eq("workers", doc.byID(t, "workers").attr("data-value"), txt.workers)
	eq("elapsed", doc.byID(t, "elapsed").attr("data-value"), txt.elapsed)
	eq("admitted", doc.byID(t, "admitted").attr("data-value"), txt.admitted)
	eq("admitted/s", doc.byID(t, "admitted").attr("data-rate"), txt.admittedRate)
	eq("rejected", doc.byID(t, "rejected").attr("data-value"), txt.rejected)
	eq("rejected/s", doc.byID(t, "rejected").attr("data-rate"), txt.rejectedRate)
	eq("abandoned", doc.byID(t, "abandoned").attr("data-abandoned"), txt.abandoned)
	eq("reclaimed", doc.byID(t, "abandoned").attr("data-reclaimed"), txt.reclaimed)

	// Admitted and rejected per second: the chart's points and the table.
	var rows, marks [][4]string
	for _, tr := range doc.byID(t, "throughput-data").withAttr("data-t") {
		rows = append(rows, [4]string{tr.attr("data-t"), tr.attr("data-admitted"), tr.attr("data-rejected"), tr.attr("data-live")})
	}
	if !reflect.DeepEqual(rows, txt.seconds) {
		t.Errorf("per-second table %v, progress lines %v", rows, txt.seconds)
	}
	bySeries := map[string]map[string]string{}
	for _, m := range doc.byID(t, "throughput-chart").withAttr("data-x") {
		if bySeries[m.attr("data-series")] == nil {
			bySeries[m.attr("data-series")] = map[string]string{}
		}
		bySeries[m.attr("data-series")][m.attr("data-x")] = m.attr("data-value")
	}
	for _, s := range txt.seconds {
		marks = append(marks, [4]string{s[0], bySeries["admitted"][s[0]], bySeries["rejected"][s[0]], s[3]})
	}
	if !reflect.DeepEqual(marks, txt.seconds) || len(bySeries["admitted"]) != len(txt.seconds) || len(bySeries["rejected"]) != len(txt.seconds) {
		t.Errorf("per-second chart %v, progress lines %v", bySeries, txt.seconds)
	}

	// Admit latency: the percentiles, the markers, and buckets that add
	// up to the samples with each percentile in the right bucket.
	pct := map[string]string{}
	for _, td := range doc.byID(t, "latency-percentiles").withAttr("data-quantile") {
		pct[td.attr("data-quantile")] = td.attr("data-value")
	}
	want := map[string]string{"p50": txt.p50, "p99": txt.p99, "p99.9": txt.p999}
	if !reflect.DeepEqual(pct, want) {
		t.Errorf("percentile table %v, text report %v", pct, want)
	}
	chart := doc.byID(t, "latency-chart")
	markers := map[string]string{}
	for _, m := range chart.all(func(n *node) bool { return n.attr("class") == "marker" }) {
		v, _ := strconv.ParseFloat(m.attr("data-value"), 64)
		markers[m.attr("data-label")] = time.Duration(v).String()
		if !strings.HasSuffix(m.text.String(), time.Duration(v).String()) {
			t.Errorf("marker text %q lacks its value %v", m.text.String(), time.Duration(v))
		}
	}
	if !reflect.DeepEqual(markers, want) {
		t.Errorf("histogram markers %v, text report %v", markers, want)
	}
	eq("samples", doc.byID(t, "latency-percentiles").attr("data-samples"), txt.samples)
	type bucket struct {
		lo, hi float64
		count  uint64
	}
	read := func(ns []*node) []bucket {
		var out []bucket
		for _, n := range ns {
			lo, _ := strconv.ParseFloat(n.attr("data-lo"), 64)
			hi, _ := strconv.ParseFloat(n.attr("data-hi"), 64)
			c, _ := strconv.ParseUint(n.attr("data-count"), 10, 64)
			out = append(out, bucket{lo, hi, c})
		}
		return out
	}
	bars, table := read(chart.withAttr("data-count")), read(doc.byID(t, "latency-buckets").withAttr("data-count"))
	if !reflect.DeepEqual(bars, table) || len(bars) == 0 {
		t.Errorf("histogram bars %v, bucket table %v", bars, table)
	}
	var total uint64
	for i, b := range bars {
		total += b.count
		if b.hi != 2*b.lo || i > 0 && b.lo != bars[i-1].hi {
			t.Errorf("bucket %d is [%v, %v): not the next power of two", i, b.lo, b.hi)
		}
	}
	eq("histogram samples", strconv.FormatUint(total, 10), txt.samples)
	for name, q := range map[string]float64{"p50": 0.5, "p99": 0.99, "p99.9": 0.999} {
		d, err := time.ParseDuration(want[name])
		if err != nil {
			t.Fatal(err)
		}
		var below uint64
		for _, b := range bars {
			if float64(d) > b.lo && float64(d) <= b.hi {
				if rank := uint64(q * float64(total)); !(below <= rank && rank < below+b.count) {
					t.Errorf("%s %v lies in bucket [%v, %v), but rank %d is not in it (%d below, %d in it)", name, d, b.lo, b.hi, rank, below, b.count)
				}
				break
			}
			below += b.count
		}
	}

	// Rejections by reason: the bars and the table.
	fromBars, fromTable := map[string]string{}, map[string]string{}
	for _, m := range doc.byID(t, "rejections-chart").withAttr("data-value") {
		fromBars[m.attr("data-label")] = m.attr("data-value")
	}
	for _, tr := range doc.byID(t, "rejections-data").withAttr("data-reason") {
		fromTable[tr.attr("data-reason")] = tr.attr("data-count")
	}
	if !reflect.DeepEqual(fromBars, txt.reasons) || !reflect.DeepEqual(fromTable, txt.reasons) {
		t.Errorf("rejections: bars %v, table %v, text report %v", fromBars, fromTable, txt.reasons)
	}

	// Peak live reservations against the limits.
	pol, err := policy.DecodePolicy(defaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	var tenants uint64
	for _, tn := range pol.Tenants {
		tenants += tn.Limits.MaxLiveActivations
	}
	wantLive := map[string]string{"peak live reservations": txt.peak,
		"node limit (max_live_activations)": strconv.FormatUint(pol.Node.Limits.MaxLiveActivations, 10),
		"tenants' limits, summed":           strconv.FormatUint(tenants, 10)}
	fromBars, fromTable = map[string]string{}, map[string]string{}
	for _, m := range doc.byID(t, "peak-live-chart").all(func(n *node) bool { return n.attr("class") == "mark" }) {
		fromBars[m.attr("data-label")] = m.attr("data-value")
	}
	for _, tr := range doc.byID(t, "peak-live-data").withAttr("data-name") {
		fromTable[tr.attr("data-name")] = tr.attr("data-value")
	}
	if !reflect.DeepEqual(fromBars, wantLive) || !reflect.DeepEqual(fromTable, wantLive) {
		t.Errorf("peak live: bars %v, table %v, want %v", fromBars, fromTable, wantLive)
	}

	// Resources before and after, each with its check's mark.
	okOf := map[string]string{}
	for _, c := range txt.checks {
		okOf[c[1]] = strconv.FormatBool(c[0] == "ok")
	}
	res := map[string][2]string{}
	for _, m := range doc.byID(t, "resources-chart").all(func(n *node) bool { return n.attr("class") == "mark" }) {
		v := res[m.attr("data-label")]
		v[map[string]int{"before": 0, "after": 1}[m.attr("data-series")]] = m.attr("data-value")
		res[m.attr("data-label")] = v
	}
	if !reflect.DeepEqual(res, txt.resources) {
		t.Errorf("resource bars %v, text report %v", res, txt.resources)
	}
	res = map[string][2]string{}
	for _, tr := range doc.byID(t, "resources-data").withAttr("data-resource") {
		res[tr.attr("data-resource")] = [2]string{tr.attr("data-before"), tr.attr("data-after")}
		if ok, judged := tr.attrs["data-ok"]; judged {
			checkMark(t, tr, ok)
			check := strings.TrimSpace(tr.children[3].children[1].text.String())
			eq("the check of "+tr.attr("data-resource"), ok, okOf[check])
		}
	}
	wantRes := map[string][2]string{"heap in use (KiB)": {txt.heapBefore, txt.heapAfter}}
	for k, v := range txt.resources {
		wantRes[k] = v
	}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("resource table %v, text report %v", res, wantRes)
	}

	// Invariants, each with its mark, and the verdict.
	var checks [][3]string
	for _, tr := range doc.byID(t, "invariants-data").withAttr("data-check") {
		checkMark(t, tr, tr.attr("data-ok"))
		mark := "ok"
		if tr.attr("data-ok") != "true" {
			mark = "FAIL"
		}
		checks = append(checks, [3]string{mark, tr.attr("data-check"), tr.children[2].text.String()})
	}
	if !reflect.DeepEqual(checks, txt.checks) {
		t.Errorf("invariants %v, text report %v", checks, txt.checks)
	}
	allOK := true
	for _, c := range txt.checks {
		allOK = allOK && c[0] == "ok"
	}
	verdict := doc.byID(t, "verdict")
	eq("verdict", verdict.attr("data-ok"), strconv.FormatBool(allOK))
	checkMark(t, verdict, strconv.FormatBool(allOK))

	eq("the text report in the page", doc.byID(t, "text-report").text.String(), txt.text)
}

// checkMark checks that the element shows the pass or fail mark that ok
// says.
func checkMark(t *testing.T, n *node, ok string) {
	t.Helper()
	text := n.text.String()
	pass, fail := strings.Contains(text, "✓ pass"), strings.Contains(text, "✗ FAIL")
	if ok == "true" && (!pass || fail) || ok != "true" && (pass || !fail) {
		t.Errorf("%q shows the wrong mark for ok=%s", text, ok)
	}
}

// A failing invariant and missing process counts show as such.
func TestReportPageShowsFailures(t *testing.T) {
	r := &report{seed: 5, workers: 2, duration: time.Second, elapsed: time.Second, admitted: 10, rejected: 3, abandoned: 2, reclaimed: 1,
		metrics: core.Metrics{Admitted: 10}, ledger: []string{"node: live=1 queued=0 fuel=0 memory=0"}, seconds: []second{{1, 10, 3, 1}},
		before: resources{goroutines: 3, countsErr: errors.New("no /proc")}, after: resources{goroutines: 4, countsErr: errors.New("no /proc")}}
	r.latency.record(1500 * time.Nanosecond)
	var page bytes.Buffer
	if err := r.html(&page); err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, page.Bytes())
	doc := parsePage(t, page.Bytes())
	v := doc.byID(t, "verdict")
	if v.attr("data-ok") != "false" || !strings.Contains(v.text.String(), "3 of 4 invariants failed") {
		t.Errorf("verdict %q (ok=%s)", v.text.String(), v.attr("data-ok"))
	}
	failed := 0
	for _, tr := range doc.byID(t, "invariants-data").withAttr("data-check") {
		checkMark(t, tr, tr.attr("data-ok"))
		if tr.attr("data-ok") == "false" {
			failed++
		}
	}
	if failed != 3 {
		t.Errorf("%d invariants marked failed, want 3", failed)
	}
	rows := doc.byID(t, "resources-data").withAttr("data-resource")
	if len(rows) != 2 || rows[0].attr("data-ok") != "false" {
		t.Errorf("resource rows without process counts: %d, goroutines ok=%s", len(rows), rows[0].attr("data-ok"))
	}
	if !strings.Contains(doc.byID(t, "counts-unavailable").text.String(), "no /proc") {
		t.Errorf("the page does not say why the process counts are missing")
	}
	if bars := doc.byID(t, "latency-chart").withAttr("data-count"); len(bars) != 1 || bars[0].attr("data-lo") != "1024" {
		t.Errorf("one sample of 1.5µs: bars %d", len(bars))
	}
}

func TestReportRefusesThePipeline(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-pipeline", "-report", filepath.Join(t.TempDir(), "r.html")}, &out, &errOut); code != 2 {
		t.Fatalf("-pipeline -report: exit %d", code)
	}
	if code := run([]string{"-duration", "300ms", "-workers", "2", "-report", filepath.Join(t.TempDir(), "missing", "r.html")}, &out, &errOut); code != 2 {
		t.Fatalf("an unwritable report: exit %d", code)
	}
}
