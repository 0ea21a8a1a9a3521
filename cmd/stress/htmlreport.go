package main

import (
	"bytes"
	_ "embed"
	"fmt"
	htmltemplate "html/template"
	"io"
	"os"
	"sort"
	"strconv"
	"time"

	"latent.dev/admission/internal/svgchart"
	"latent.dev/admission/policy"
)

// The -report page: one self-contained HTML file, inline CSS, no script,
// charts as inline SVG drawn by internal/svgchart. Every number a chart
// shows is also in the page as text, in a table under the chart whose
// rows carry the numbers as data- attributes, so that a test (or a
// browser check) can hold each chart against the text report.

//go:embed report.html.tmpl
var reportTemplateText string

var reportTemplate = htmltemplate.Must(htmltemplate.New("report").Funcs(htmltemplate.FuncMap{
	"ns": func(v float64) string { return time.Duration(v).String() },
}).Parse(reportTemplateText))

// liveLimit is one limit that the node's peak of live reservations is
// held against.
type liveLimit struct {
	name  string
	value uint64
}

// liveLimits are the node's own limit on live activations and what the
// tenants may hold together.
func liveLimits(c *policy.Compiled) []liveLimit {
	var tenants uint64
	for i := 0; i < c.NumTenants(); i++ {
		tenants += c.Tenant(policy.TenantID(i)).Limits.MaxLiveActivations
	}
	return []liveLimit{
		{"node limit (max_live_activations)", c.Node().Limits.MaxLiveActivations},
		{"tenants' limits, summed", tenants},
	}
}

// Colors of the page, shared by charts and marks.
const (
	colorAdmitted = "#1f77b4"
	colorRejected = "#e8743b"
	colorPeak     = "#2ca02c"
	colorLimit    = "#8b949e"
	colorBefore   = "#8b949e"
	colorAfter    = "#1f77b4"
)

type reportPage struct {
	Title, Verdict                  string
	OK                              bool
	Failed                          int
	Elapsed, Seed, Workers          string
	Admitted, Rejected              int64
	AdmittedRate, RejectedRate      string
	Seconds                         []secondRow
	Throughput, Latency, Rejections htmltemplate.HTML
	PeakLiveChart, ResourcesChart   htmltemplate.HTML
	Percentiles                     []percentile
	Samples                         uint64
	Buckets                         []svgchart.Bucket
	Reasons                         []reasonCount
	PeakLive                        uint64
	Limits                          []limitRow
	CountsOK                        bool
	CountsErr                       string
	Resources                       []resourceRow
	HeapBefore, HeapAfter           uint64
	Checks                          []checkRow
	Abandoned, Reclaimed            int64
	Text                            string
}

type secondRow struct {
	T                  int
	Admitted, Rejected int64
	Live               uint64
}

type percentile struct{ Name, Value string }

type reasonCount struct {
	Reason string
	Count  int64
}

type limitRow struct {
	Name    string
	Value   uint64
	Percent string // the peak's share of it
}

type resourceRow struct {
	Name          string
	Before, After int
	Check         string // the invariant that judges it
	OK            bool
}

type checkRow struct {
	Name, Detail string
	OK           bool
}

// writeHTML writes the report page to path.
func (r *report) writeHTML(path string) error {
	var buf bytes.Buffer
	if err := r.html(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// html writes the report page.
func (r *report) html(w io.Writer) error {
	var text bytes.Buffer
	r.print(&text)
	secs := r.elapsed.Seconds()
	p := reportPage{
		Seed: strconv.FormatUint(r.seed, 10), Workers: strconv.Itoa(r.workers), Elapsed: r.elapsed.Round(time.Millisecond).String(),
		Admitted: r.admitted, Rejected: r.rejected,
		AdmittedRate: fmt.Sprintf("%.0f", float64(r.admitted)/secs), RejectedRate: fmt.Sprintf("%.0f", float64(r.rejected)/secs),
		Samples: r.latency.total, Buckets: r.latency.octaves(), PeakLive: r.peakLive,
		HeapBefore: r.before.heapInuse >> 10, HeapAfter: r.after.heapInuse >> 10,
		Abandoned: r.abandoned, Reclaimed: r.reclaimed, Text: text.String(),
		CountsOK: r.before.countsErr == nil && r.after.countsErr == nil,
	}
	for _, s := range r.seconds {
		p.Seconds = append(p.Seconds, secondRow{s.tick, s.admitted, s.rejected, s.live})
	}
	p.Title = fmt.Sprintf("Soak report: %s with %d workers, seed %d", p.Elapsed, r.workers, r.seed)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}} {
		p.Percentiles = append(p.Percentiles, percentile{q.name, r.latency.quantile(q.q).String()})
	}
	for reason, n := range r.metrics.RejectedByReason() {
		p.Reasons = append(p.Reasons, reasonCount{string(reason), n})
	}
	sort.Slice(p.Reasons, func(i, j int) bool {
		a, b := p.Reasons[i], p.Reasons[j]
		return a.Count > b.Count || a.Count == b.Count && a.Reason < b.Reason
	})
	for _, l := range r.limits {
		p.Limits = append(p.Limits, limitRow{l.name, l.value, fmt.Sprintf("%.1f%%", 100*float64(r.peakLive)/float64(max(l.value, 1)))})
	}
	checks := r.checks()
	byName := map[string]bool{}
	for _, c := range checks {
		p.Checks = append(p.Checks, checkRow{c.name, c.detail, c.ok})
		byName[c.name] = c.ok
		if !c.ok {
			p.Failed++
		}
	}
	p.OK = p.Failed == 0
	p.Verdict = "every invariant held"
	if !p.OK {
		p.Verdict = fmt.Sprintf("%d of %d invariants failed", p.Failed, len(checks))
	}
	const (
		goroutinesCheck = "goroutines did not grow"
		threadsCheck    = "threads did not grow beyond the runtime's slack"
	)
	p.Resources = []resourceRow{{"goroutines", r.before.goroutines, r.after.goroutines, goroutinesCheck, byName[goroutinesCheck]}}
	if p.CountsOK {
		b, a := r.before.counts, r.after.counts
		p.Resources = append(p.Resources,
			resourceRow{"threads", b.Threads, a.Threads, threadsCheck, byName[threadsCheck]},
			resourceRow{"descriptors", b.Descriptors, a.Descriptors, "descriptors did not grow", byName["descriptors did not grow"]},
			resourceRow{"sockets", b.Sockets, a.Sockets, "sockets did not grow", byName["sockets did not grow"]},
			resourceRow{"children", b.Children, a.Children, "child processes did not grow", byName["child processes did not grow"]})
	} else {
		p.CountsErr = fmt.Sprint(r.before.countsErr)
	}
	r.charts(&p)
	return reportTemplate.Execute(w, p)
}

// charts draws the page's SVG charts from the same numbers as its tables.
func (r *report) charts(p *reportPage) {
	x := make([]float64, len(r.seconds))
	adm, rej := make([]float64, len(r.seconds)), make([]float64, len(r.seconds))
	for i, s := range r.seconds {
		x[i], adm[i], rej[i] = float64(s.tick), float64(s.admitted), float64(s.rejected)
	}
	p.Throughput = htmltemplate.HTML(svgchart.Line{ID: "throughput-chart", Title: "Admitted and rejected requests per second",
		XLabel: "seconds into the soak", YLabel: "requests per second", X: x, Area: true,
		Series:  []svgchart.Series{{Name: "admitted", Color: colorAdmitted, Values: adm}, {Name: "rejected", Color: colorRejected, Values: rej}},
		FormatX: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "s" }}.SVG())

	var markers []svgchart.Ref
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}} {
		markers = append(markers, svgchart.Ref{Label: q.name, Value: float64(r.latency.quantile(q.q))})
	}
	p.Latency = htmltemplate.HTML(svgchart.Histogram{ID: "latency-chart", Title: "Admit latency histogram, log-scale buckets",
		XLabel: "admit latency (log scale)", YLabel: "samples (log scale)", Buckets: p.Buckets, LogY: true, Markers: markers,
		Color: colorAdmitted, Height: 340, FormatX: func(v float64) string { return time.Duration(v).String() }}.SVG())

	cats, vals := make([]string, len(p.Reasons)), make([]float64, len(p.Reasons))
	for i, rc := range p.Reasons {
		cats[i], vals[i] = rc.Reason, float64(rc.Count)
	}
	p.Rejections = htmltemplate.HTML(svgchart.Bars{ID: "rejections-chart", Title: "Rejections by reason", ValueLabel: "rejections (library counters)",
		Categories: cats, Series: []svgchart.Series{{Color: colorRejected, Values: vals}}}.SVG())

	cats, vals = []string{"peak live reservations"}, []float64{float64(r.peakLive)}
	colors := []string{colorPeak}
	for _, l := range r.limits {
		cats, vals, colors = append(cats, l.name), append(vals, float64(l.value)), append(colors, colorLimit)
	}
	p.PeakLiveChart = htmltemplate.HTML(svgchart.Bars{ID: "peak-live-chart", Title: "Peak live reservations against the limits",
		ValueLabel: "live reservations", Categories: cats, Series: []svgchart.Series{{Values: vals}}, Colors: colors,
		FormatValue: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }}.SVG())

	cats = make([]string, len(p.Resources))
	before, after := make([]float64, len(p.Resources)), make([]float64, len(p.Resources))
	for i, rr := range p.Resources {
		cats[i], before[i], after[i] = rr.Name, float64(rr.Before), float64(rr.After)
	}
	p.ResourcesChart = htmltemplate.HTML(svgchart.Bars{ID: "resources-chart", Title: "Resource counts before and after the soak",
		ValueLabel: "count", Categories: cats,
		Series:      []svgchart.Series{{Name: "before", Color: colorBefore, Values: before}, {Name: "after", Color: colorAfter, Values: after}},
		FormatValue: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }}.SVG())
}

// octaves folds the histogram into log-scale buckets, one per power of
// two of nanoseconds (record puts [2^e, 2^(e+1)) into counts[8e:8e+8]),
// from the lowest non-empty one to the highest.
func (h *histogram) octaves() []svgchart.Bucket {
	var counts [64]uint64
	lo, hi := -1, -1
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		e := i / 8
		counts[e] += c
		if lo < 0 {
			lo = e
		}
		hi = e
	}
	if lo < 0 {
		return nil
	}
	out := make([]svgchart.Bucket, 0, hi-lo+1)
	for e := lo; e <= hi; e++ {
		out = append(out, svgchart.Bucket{Lo: float64(uint64(1) << e), Hi: float64(uint64(1) << (e + 1)), Count: counts[e]})
	}
	return out
}
