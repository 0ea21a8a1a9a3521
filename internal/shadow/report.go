package shadow

import (
	"fmt"
	htmltemplate "html/template"
	"io"
	"sort"
	"strconv"
	"strings"

	"latent.dev/admission/internal/svgchart"
)

// TimeFormat is how a decision's time is printed: RFC 3339 with
// milliseconds, in UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Refused is the number of decisions refused as recorded and under the
// candidate.
func (r *Result) Refused() (recorded, candidate uint64) {
	return r.Decisions - r.RecordedAdmitted, r.Decisions - r.CandidateAdmitted
}

// Summary is the one-line verdict: "shadow: 12345 decisions, 1200
// refused as recorded, 1350 under the candidate, 150 changed; exact", or
// "...; NOT exact: 3 lines dropped by the recorder".
func (r *Result) Summary() string {
	rec, cand := r.Refused()
	s := fmt.Sprintf("shadow: %d decisions, %d refused as recorded, %d under the candidate, %d changed", r.Decisions, rec, cand, r.Changed)
	if r.Estimated > 0 {
		s += fmt.Sprintf(", %d holds estimated", r.Estimated)
	}
	if r.Exact {
		return s + "; exact"
	}
	return s + "; NOT exact: " + strings.Join(r.Inexact, ", ")
}

// reasonTotals sums the refusals per reason over the tenants, in reason
// order.
func (r *Result) reasonTotals() (reasons []string, recorded, candidate []float64) {
	rec, cand := map[string]uint64{}, map[string]uint64{}
	for _, c := range r.Refusals {
		rec[c.Reason] += c.Recorded
		cand[c.Reason] += c.Candidate
	}
	for reason := range rec {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		recorded = append(recorded, float64(rec[reason]))
		candidate = append(candidate, float64(cand[reason]))
	}
	return reasons, recorded, candidate
}

// Colors of the report's two answers and the limits.
const (
	colorRecorded  = "#8b949e"
	colorCandidate = "#1f77b4"
	colorLimit     = "#cf222e"
)

type reportScope struct {
	ID, Title string
	Chart     htmltemplate.HTML
}

type reportChange struct {
	Time, Order, Target, ActivationID, Recorded, Candidate string
}

type reportPage struct {
	Summary                                      string
	Exact                                        bool
	Inexact                                      []string
	Start, Policy                                string
	Decisions, RecordedRefused, CandidateRefused uint64
	Changed, Estimated                           uint64
	Scopes                                       []reportScope
	Reasons                                      htmltemplate.HTML
	Refusals                                     []Refusals
	Changes                                      []reportChange
	MoreChanges                                  uint64
}

// WriteReport writes res as one self-contained HTML page: no script, no
// external resource, inline CSS, and charts as inline SVG. Every string
// from the trace is escaped.
func WriteReport(w io.Writer, res *Result) error {
	rec, cand := res.Refused()
	p := reportPage{Summary: res.Summary(), Exact: res.Exact, Inexact: res.Inexact,
		Start: res.Start.UTC().Format(TimeFormat), Policy: res.PolicySHA256,
		Decisions: res.Decisions, RecordedRefused: rec, CandidateRefused: cand, Changed: res.Changed, Estimated: res.Estimated,
		Refusals: res.Refusals}
	x := make([]float64, len(res.Times))
	for i, t := range res.Times {
		x[i] = t.Seconds()
	}
	for i, s := range res.Series {
		id := "scope-" + strconv.Itoa(i) + "-chart"
		title := s.Scope + ": " + s.Measure + " against the limit"
		p.Scopes = append(p.Scopes, reportScope{ID: id, Title: title, Chart: htmltemplate.HTML(svgchart.Line{
			ID: id, Title: title, XLabel: "seconds since the trace began", YLabel: s.Measure, X: x,
			Series: []svgchart.Series{{Name: "recorded", Color: colorRecorded, Values: s.Recorded},
				{Name: "candidate", Color: colorCandidate, Values: s.Candidate}},
			Refs:    []svgchart.Ref{{Label: "candidate limit " + strconv.FormatUint(s.Limit, 10), Value: float64(s.Limit), Color: colorLimit}},
			FormatX: func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "s" },
		}.SVG())})
	}
	reasons, recorded, candidate := res.reasonTotals()
	p.Reasons = htmltemplate.HTML(svgchart.Bars{ID: "reasons-chart", Title: "Refusals by reason, recorded and under the candidate",
		ValueLabel: "refusals", Categories: reasons,
		Series: []svgchart.Series{{Name: "recorded", Color: colorRecorded, Values: recorded},
			{Name: "candidate", Color: colorCandidate, Values: candidate}}}.SVG())
	for _, c := range res.Changes {
		p.Changes = append(p.Changes, reportChange{Time: c.Time.UTC().Format(TimeFormat), Order: strconv.FormatUint(c.Order, 10),
			Target: c.Tenant + "/" + c.Service + "/" + c.Route, ActivationID: c.ActivationID,
			Recorded: c.Recorded.String(), Candidate: c.Candidate.String()})
	}
	p.MoreChanges = res.Changed - uint64(len(res.Changes))
	return reportTemplate.Execute(w, p)
}

var reportTemplate = htmltemplate.Must(htmltemplate.New("shadow").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Shadow replay</title>
<style>
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --pass: #1a7f37; --fail: #cf222e; --bg-alt: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #fff; }
main { max-width: 1240px; margin: 0 auto; padding: 16px; }
h1 { font-size: 1.5rem; margin: 0 0 4px; }
h2 { font-size: 1.15rem; margin: 0 0 8px; }
p { margin: 4px 0; }
.muted { color: var(--muted); }
.verdict { display: inline-block; font-weight: 600; padding: 2px 10px; border-radius: 12px; color: #fff; }
.verdict.pass { background: var(--pass); }
.verdict.fail { background: var(--fail); }
dl.summary { display: flex; flex-wrap: wrap; gap: 8px 28px; margin: 12px 0 16px; }
dl.summary div { min-width: 8em; }
dl.summary dt { color: var(--muted); font-size: .85rem; }
dl.summary dd { margin: 0; font-size: 1.25rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 480px), 1fr)); gap: 16px; margin-top: 16px; }
section { border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; min-width: 0; }
section.wide { grid-column: 1 / -1; }
svg.chart { display: block; width: 100%; max-width: 540px; height: auto; margin: 4px auto 8px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: .9rem; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; }
td.id { word-break: break-all; }
tbody tr:nth-child(even) { background: var(--bg-alt); }
@media (max-width: 600px) { main { padding: 8px; } section { padding: 10px 8px; } .grid { gap: 10px; } th, td { padding: 3px 4px; } }
</style>
</head>
<body>
<main>
<header>
<h1>Shadow replay</h1>
<p class="muted">a recorded trace replayed under a candidate policy; the trace began {{.Start}}, recorded under policy sha256 {{.Policy}}</p>
<p><span id="verdict" class="verdict {{if .Exact}}pass{{else}}fail{{end}}" data-exact="{{.Exact}}">{{if .Exact}}exact{{else}}NOT exact{{end}}</span>
{{range .Inexact}}<span class="muted inexact">{{.}}. </span>{{end}}</p>
<p id="summary">{{.Summary}}</p>
<dl class="summary">
<div><dt>decisions</dt><dd id="decisions" data-value="{{.Decisions}}">{{.Decisions}}</dd></div>
<div><dt>refused as recorded</dt><dd id="recorded-refused" data-value="{{.RecordedRefused}}">{{.RecordedRefused}}</dd></div>
<div><dt>refused under the candidate</dt><dd id="candidate-refused" data-value="{{.CandidateRefused}}">{{.CandidateRefused}}</dd></div>
<div><dt>changed</dt><dd id="changed" data-value="{{.Changed}}">{{.Changed}}</dd></div>
<div><dt>holds estimated</dt><dd id="estimated" data-value="{{.Estimated}}">{{.Estimated}}</dd></div>
</dl>
<p class="muted">The candidate's reservations include the estimated holds of decisions the node refused and the candidate admits: each is held for the median recorded duration of its route, or its granted wall time when the route has none. They are an estimate.</p>
</header>

<div class="grid">
<section id="reasons" class="wide">
<h2>Refusals by reason</h2>
{{.Reasons}}
<div class="scroll"><table id="refusals-data">
<thead><tr><th>tenant</th><th>reason</th><th class="n">recorded</th><th class="n">candidate</th></tr></thead>
<tbody>{{range .Refusals}}<tr data-tenant="{{.Tenant}}" data-reason="{{.Reason}}"><td>{{.Tenant}}</td><td>{{.Reason}}</td><td class="n">{{.Recorded}}</td><td class="n">{{.Candidate}}</td></tr>{{end}}</tbody>
</table></div>
</section>
{{range .Scopes}}<section class="scope">
<h2>{{.Title}}</h2>
{{.Chart}}
</section>
{{end}}
<section id="changes" class="wide">
<h2>Changed decisions</h2>
<div class="scroll"><table id="changes-data">
<thead><tr><th>time</th><th class="n">order</th><th>target</th><th>activation</th><th>recorded</th><th>candidate</th></tr></thead>
<tbody>{{range .Changes}}<tr><td>{{.Time}}</td><td class="n">{{.Order}}</td><td class="id">{{.Target}}</td><td class="id">{{.ActivationID}}</td><td>{{.Recorded}}</td><td>{{.Candidate}}</td></tr>{{end}}</tbody>
</table></div>
{{if .MoreChanges}}<p class="muted">and {{.MoreChanges}} more</p>{{end}}
{{if not .Changes}}<p class="muted">No decision changed.</p>{{end}}
</section>
</div>
</main>
</body>
</html>
`))
