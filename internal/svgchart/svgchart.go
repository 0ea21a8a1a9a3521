// Package svgchart draws small, self-contained SVG charts in Go: a line
// or area chart over a numeric x axis, horizontal bars (grouped when there
// is more than one series) and a histogram over log-scale buckets. The
// output needs no script, stylesheet or font from anywhere: it is one
// <svg> element to inline in an HTML page (inline SVG in HTML needs no
// namespace declaration, so the output names no URL at all).
//
// Every mark carries its number twice, exactly, so that a reader, a test
// or a browser check can read back what the chart shows: as data-
// attributes (data-series, data-label, data-x, data-value, data-lo,
// data-hi, data-count) and in the text of a <title> child, which a
// browser shows as a tooltip. Ticks and the labels drawn beside bars may
// be rounded (1.5k). The chart's own id is the <svg>'s id.
package svgchart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// DefaultWidth is a chart's width in SVG user units when its Width is 0.
// Charts scale to their container (the <svg> has a viewBox and the page
// sets width 100%), so the width only fixes the proportions and the text
// size relative to the plot: give a chart about the width in pixels it
// will have, and its text will be about the size of the page's.
const DefaultWidth = 480

const (
	fontSize  = 14
	tickSize  = 12
	marginTop = 34 // room for the legend
	lineColor = "#5b6470"
	gridColor = "#e3e6ea"
	textColor = "#1f2328"
)

// Palette is the default series colors: distinguishable for the common
// color-vision deficiencies and on white.
var Palette = []string{"#1f77b4", "#e8743b", "#2ca02c", "#9467bd", "#8c564b", "#d62728"}

// Series is one named sequence of values.
type Series struct {
	Name   string
	Color  string // empty: from Palette
	Values []float64
}

// Ref is a reference value drawn as a dashed line across the plot, with
// its label: a limit, a percentile, a peak.
type Ref struct {
	Label string
	Value float64
	Color string // empty: a dark gray
}

// Line is a line chart over numeric x; with Area the first series is
// filled down to zero.
type Line struct {
	ID             string
	Title          string // the <svg>'s <title>, for screen readers
	XLabel, YLabel string
	X              []float64
	Series         []Series // each with len(X) values
	Area           bool
	Refs           []Ref // horizontal lines at y values
	// FormatX and FormatY label the ticks and the marks' titles; nil is
	// a compact number (1.5k, 2M).
	FormatX, FormatY func(float64) string
	Width, Height    int // 0: DefaultWidth, 300
}

// Bars is a horizontal bar chart: one row per category, one bar per
// series within a row. Each bar is labeled with its value at its end.
type Bars struct {
	ID         string
	Title      string
	ValueLabel string // under the value axis
	Categories []string
	Series     []Series // each with len(Categories) values
	// Colors, when set, colors each category's bar of a one-series chart.
	Colors      []string
	Refs        []Ref // vertical lines at values
	FormatValue func(float64) string
	Width       int // 0: DefaultWidth; the height follows from the rows
}

// Bucket is one histogram bucket: the samples in [Lo, Hi).
type Bucket struct {
	Lo, Hi float64
	Count  uint64
}

// Histogram draws buckets on a log-scale x axis; with LogY the counts are
// on a log scale too, so that a tail of a few samples stays visible.
type Histogram struct {
	ID             string
	Title          string
	XLabel, YLabel string
	Buckets        []Bucket // ascending, Lo > 0
	LogY           bool
	Markers        []Ref // vertical lines at x values
	Color          string
	FormatX        func(float64) string // ticks, bucket bounds and markers; nil: compact
	Width, Height  int                  // 0: DefaultWidth, 300
}

// svg is an SVG document being written.
type svg struct {
	b strings.Builder
}

func (s *svg) open(id, title string, w, h int) {
	fmt.Fprintf(&s.b, `<svg id="%s" class="chart" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-labelledby="%s-title" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="%d" fill="%s">`,
		esc(id), w, h, w, h, esc(id), fontSize, textColor)
	fmt.Fprintf(&s.b, `<title id="%s-title">%s</title>`, esc(id), esc(title))
}

func (s *svg) close() string {
	s.b.WriteString("</svg>")
	return s.b.String()
}

// text writes a <text> at (x, y) with extra attributes.
func (s *svg) text(x, y float64, attrs, body string) {
	fmt.Fprintf(&s.b, `<text x="%s" y="%s" %s>%s</text>`, num(x), num(y), attrs, esc(body))
}

func (s *svg) line(x1, y1, x2, y2 float64, attrs string) {
	fmt.Fprintf(&s.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" %s/>`, num(x1), num(y1), num(x2), num(y2), attrs)
}

// legend draws the series names with their colors along the top.
func (s *svg) legend(x float64, series []Series) {
	if len(series) < 2 {
		return
	}
	for i, se := range series {
		fmt.Fprintf(&s.b, `<rect x="%s" y="10" width="12" height="12" rx="2" fill="%s"/>`, num(x), esc(color(se.Color, i)))
		s.text(x+17, 21, `class="legend"`, se.Name)
		x += 17 + textWidth(se.Name, fontSize) + 22
	}
}

// SVG returns the chart as one <svg> element.
func (c Line) SVG() string {
	h := c.Height
	if h == 0 {
		h = 300
	}
	fx, fy := formatter(c.FormatX), formatter(c.FormatY)
	xmin, xmax := 0.0, 1.0
	if len(c.X) > 0 {
		xmin, xmax = math.Min(0, minOf(c.X)), maxOf(c.X)
		if xmax <= xmin {
			xmax = xmin + 1
		}
	}
	ymax := 0.0
	for _, se := range c.Series {
		ymax = math.Max(ymax, maxOf(se.Values))
	}
	for _, r := range c.Refs {
		ymax = math.Max(ymax, r.Value)
	}
	yticks := niceTicks(0, ymax, 5)
	ymax = yticks[len(yticks)-1]
	left := 18 + fontSize + 6 + maxWidth(yticks, fy, tickSize)
	w := width(c.Width)
	p := plot{left: left, right: float64(w) - 16, top: marginTop, bottom: float64(h) - 48}
	sx := func(v float64) float64 { return p.left + (v-xmin)/(xmax-xmin)*(p.right-p.left) }
	sy := func(v float64) float64 { return p.bottom - v/ymax*(p.bottom-p.top) }

	var s svg
	s.open(c.ID, c.Title, w, h)
	s.legend(p.left, c.Series)
	for _, t := range yticks {
		s.line(p.left, sy(t), p.right, sy(t), `stroke="`+gridColor+`"`)
		s.text(p.left-6, sy(t)+4, `text-anchor="end" font-size="`+strconv.Itoa(tickSize)+`" class="tick"`, fy(t))
	}
	for _, t := range niceTicks(xmin, xmax, 8) {
		if t < xmin || t > xmax {
			continue
		}
		s.line(sx(t), p.bottom, sx(t), p.bottom+5, `stroke="`+lineColor+`"`)
		s.text(sx(t), p.bottom+19, `text-anchor="middle" font-size="`+strconv.Itoa(tickSize)+`" class="tick"`, fx(t))
	}
	p.axes(&s, c.XLabel, c.YLabel, float64(h))
	for i, se := range c.Series {
		col := color(se.Color, i)
		var pts []string
		for j, v := range se.Values {
			if j < len(c.X) {
				pts = append(pts, num(sx(c.X[j]))+","+num(sy(v)))
			}
		}
		if len(pts) == 0 {
			continue
		}
		if c.Area && i == 0 {
			area := "M" + num(sx(c.X[0])) + "," + num(p.bottom) + " L" + strings.Join(pts, " L") + " L" + num(sx(c.X[len(pts)-1])) + "," + num(p.bottom) + " Z"
			fmt.Fprintf(&s.b, `<path d="%s" fill="%s" fill-opacity="0.15" stroke="none"/>`, area, esc(col))
		}
		fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5" stroke-linejoin="round"/>`, strings.Join(pts, " "), esc(col))
		fmt.Fprintf(&s.b, `<g class="series" data-series="%s" fill="%s">`, esc(se.Name), esc(col))
		for j, v := range se.Values {
			if j >= len(c.X) {
				break
			}
			fmt.Fprintf(&s.b, `<circle class="mark" cx="%s" cy="%s" r="3.5" data-series="%s" data-x="%s" data-value="%s"><title>%s</title></circle>`,
				num(sx(c.X[j])), num(sy(v)), esc(se.Name), raw(c.X[j]), raw(v), esc(fmt.Sprintf("%s at %s: %s", se.Name, fx(c.X[j]), raw(v))))
		}
		s.b.WriteString("</g>")
	}
	for _, r := range c.Refs {
		y := sy(r.Value)
		s.refLine(p.left, y, p.right, y, r)
		s.text(p.right-4, y-5, `text-anchor="end" class="ref-label"`, r.Label)
	}
	return s.close()
}

// SVG returns the chart as one <svg> element.
func (c Bars) SVG() string {
	fv := formatter(c.FormatValue)
	n := max(1, len(c.Series))
	vmax := 0.0
	for _, se := range c.Series {
		vmax = math.Max(vmax, maxOf(se.Values))
	}
	for _, r := range c.Refs {
		vmax = math.Max(vmax, r.Value)
	}
	ticks := niceTicks(0, vmax, 5)
	vmax = ticks[len(ticks)-1]
	w := width(c.Width)
	// The category names stand left of their bars when they fit in 45% of
	// the width, and above them when they do not.
	labelW := 0.0
	for _, cat := range c.Categories {
		labelW = math.Max(labelW, textWidth(cat, fontSize))
	}
	above := labelW > float64(w)*0.45
	barH, gap := 22.0, 12.0
	labelH := 0.0
	if above {
		labelW, labelH, gap = -8, fontSize+4, 8
	}
	rowH := labelH + barH*float64(n) + gap
	top := 10.0
	if n > 1 {
		top = marginTop
	}
	h := int(top + rowH*float64(len(c.Categories)) + 50)
	// Room at the right for the value label of the longest bar.
	valueW := 8.0
	for _, se := range c.Series {
		for _, v := range se.Values {
			valueW = math.Max(valueW, textWidth(fv(v), tickSize)+8)
		}
	}
	p := plot{left: 10 + labelW + 8, right: float64(w) - 10 - valueW, top: top, bottom: top + rowH*float64(len(c.Categories))}
	sx := func(v float64) float64 { return p.left + v/vmax*(p.right-p.left) }

	var s svg
	s.open(c.ID, c.Title, w, h)
	s.legend(p.left, c.Series)
	for _, t := range ticks {
		s.line(sx(t), p.top, sx(t), p.bottom, `stroke="`+gridColor+`"`)
		s.text(sx(t), p.bottom+18, `text-anchor="middle" font-size="`+strconv.Itoa(tickSize)+`" class="tick"`, fv(t))
	}
	if c.ValueLabel != "" {
		s.text((p.left+p.right)/2, p.bottom+40, `text-anchor="middle" class="axis-label"`, c.ValueLabel)
	}
	for i, cat := range c.Categories {
		y0 := p.top + rowH*float64(i) + gap/2
		if above {
			s.text(p.left, y0+fontSize-1, `class="category"`, cat)
			y0 += labelH
		} else {
			s.text(p.left-8, y0+barH*float64(n)/2+5, `text-anchor="end" class="category"`, cat)
		}
		for j, se := range c.Series {
			if i >= len(se.Values) {
				continue
			}
			v := se.Values[i]
			col := color(se.Color, j)
			if len(c.Series) == 1 && i < len(c.Colors) && c.Colors[i] != "" {
				col = c.Colors[i]
			}
			y := y0 + barH*float64(j)
			w := math.Max(sx(v)-p.left, 0)
			title := cat + ": " + raw(v)
			if se.Name != "" {
				title = cat + ", " + se.Name + ": " + raw(v)
			}
			fmt.Fprintf(&s.b, `<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s" data-label="%s" data-series="%s" data-value="%s"><title>%s</title></rect>`,
				num(p.left), num(y+1), num(w), num(barH-2), esc(col), esc(cat), esc(se.Name), raw(v), esc(title))
			s.text(p.left+w+5, y+barH/2+4.5, `font-size="`+strconv.Itoa(tickSize)+`" class="value" data-label="`+esc(cat)+`" data-series="`+esc(se.Name)+`"`, fv(v))
		}
	}
	s.line(p.left, p.top, p.left, p.bottom, `stroke="`+lineColor+`"`)
	for _, r := range c.Refs {
		x := sx(r.Value)
		s.refLine(x, p.top, x, p.bottom, r)
	}
	return s.close()
}

// SVG returns the chart as one <svg> element.
func (c Histogram) SVG() string {
	h := c.Height
	if h == 0 {
		h = 300
	}
	fx := formatter(c.FormatX)
	col := c.Color
	if col == "" {
		col = Palette[0]
	}
	lo, hi := 1.0, 10.0
	var cmax uint64
	if len(c.Buckets) > 0 {
		lo, hi = c.Buckets[0].Lo, c.Buckets[len(c.Buckets)-1].Hi
		for _, b := range c.Buckets {
			cmax = max(cmax, b.Count)
		}
	}
	lo, hi = math.Max(lo, math.SmallestNonzeroFloat64), math.Max(hi, lo*10)
	lx0, lx1 := math.Log10(lo), math.Log10(hi)
	var yticks []float64
	var sy func(float64) float64
	w := width(c.Width)
	p := plot{right: float64(w) - 16, top: marginTop + 18*float64(len(c.Markers)), bottom: float64(h) - 48}
	if c.LogY {
		top := math.Pow(10, math.Ceil(math.Log10(math.Max(float64(cmax), 1))))
		if top < 10 {
			top = 10
		}
		for t := 1.0; t <= top; t *= 10 {
			yticks = append(yticks, t)
		}
		bottom := math.Log10(0.5) // a single sample stays visible
		sy = func(v float64) float64 {
			if v <= 0 {
				return p.bottom
			}
			return p.bottom - (math.Log10(v)-bottom)/(math.Log10(top)-bottom)*(p.bottom-p.top)
		}
	} else {
		yticks = niceTicks(0, float64(cmax), 5)
		top := yticks[len(yticks)-1]
		sy = func(v float64) float64 { return p.bottom - v/top*(p.bottom-p.top) }
	}
	p.left = 18 + fontSize + 6 + maxWidth(yticks, formatter(nil), tickSize)
	sx := func(v float64) float64 { return p.left + (math.Log10(v)-lx0)/(lx1-lx0)*(p.right-p.left) }

	var s svg
	s.open(c.ID, c.Title, w, h)
	for _, t := range yticks {
		s.line(p.left, sy(t), p.right, sy(t), `stroke="`+gridColor+`"`)
		s.text(p.left-6, sy(t)+4, `text-anchor="end" font-size="`+strconv.Itoa(tickSize)+`" class="tick"`, compact(t))
	}
	for _, t := range logTicks(lo, hi) {
		s.line(sx(t), p.bottom, sx(t), p.bottom+5, `stroke="`+lineColor+`"`)
		s.text(sx(t), p.bottom+19, `text-anchor="middle" font-size="`+strconv.Itoa(tickSize)+`" class="tick"`, fx(t))
	}
	p.axes(&s, c.XLabel, c.YLabel, float64(h))
	for _, b := range c.Buckets {
		x0, x1 := sx(b.Lo), sx(b.Hi)
		y := sy(float64(b.Count))
		fmt.Fprintf(&s.b, `<rect class="mark" x="%s" y="%s" width="%s" height="%s" fill="%s" data-lo="%s" data-hi="%s" data-count="%d"><title>%s</title></rect>`,
			num(x0+0.5), num(y), num(math.Max(x1-x0-1, 0.5)), num(p.bottom-y), esc(col), raw(b.Lo), raw(b.Hi), b.Count,
			esc(fmt.Sprintf("%s to %s: %d", fx(b.Lo), fx(b.Hi), b.Count)))
	}
	// Each marker is a dashed line with its name at the top, staggered so
	// that close markers stay legible, and its name and value in a row of
	// labels above the plot.
	lx := p.left
	for i, m := range c.Markers {
		x := sx(math.Min(math.Max(m.Value, lo), hi))
		r := m
		if r.Color == "" {
			r.Color = markerColors[i%len(markerColors)]
		}
		tagY := p.top - 18*float64(len(c.Markers)-1-i) - 4
		s.refLine(x, tagY+4, x, p.bottom, r)
		s.text(x, tagY, `text-anchor="middle" font-size="`+strconv.Itoa(tickSize)+`" class="marker-tag" fill="`+esc(r.Color)+`"`, m.Label)
		label := m.Label + " " + fx(m.Value)
		fmt.Fprintf(&s.b, `<rect x="%s" y="10" width="12" height="3" fill="%s"/>`, num(lx), esc(r.Color))
		s.text(lx+16, 17, `class="marker" data-label="`+esc(m.Label)+`" data-value="`+raw(m.Value)+`"`, label)
		lx += 16 + textWidth(label, fontSize) + 20
	}
	return s.close()
}

// plot is the rectangle the data is drawn in.
type plot struct{ left, right, top, bottom float64 }

// axes draws the x and y axis lines and their labels.
func (p plot) axes(s *svg, xlabel, ylabel string, h float64) {
	s.line(p.left, p.bottom, p.right, p.bottom, `stroke="`+lineColor+`"`)
	s.line(p.left, p.top, p.left, p.bottom, `stroke="`+lineColor+`"`)
	if xlabel != "" {
		s.text((p.left+p.right)/2, h-8, `text-anchor="middle" class="axis-label"`, xlabel)
	}
	if ylabel != "" {
		cy := (p.top + p.bottom) / 2
		s.text(18, cy, `text-anchor="middle" class="axis-label" transform="rotate(-90 18 `+num(cy)+`)"`, ylabel)
	}
}

func (s *svg) refLine(x1, y1, x2, y2 float64, r Ref) {
	col := r.Color
	if col == "" {
		col = "#444c56"
	}
	fmt.Fprintf(&s.b, `<line class="ref" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="5 4" data-label="%s" data-value="%s"><title>%s</title></line>`,
		num(x1), num(y1), num(x2), num(y2), esc(col), esc(r.Label), raw(r.Value), esc(r.Label))
}

// niceTicks returns about n round tick values from at or below lo to at
// or above hi; the last is the axis maximum.
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / float64(n))
	first := math.Floor(lo / step)
	// Round away the float noise of the multiplication: a step has at
	// most one significant digit past its power of ten.
	decimals := max(0, 1-int(math.Floor(math.Log10(step))))
	var out []float64
	for i := 0; ; i++ {
		t, _ := strconv.ParseFloat(strconv.FormatFloat((first+float64(i))*step, 'f', decimals, 64), 64)
		out = append(out, t)
		if t >= hi || i > 4*n {
			return out
		}
	}
}

// niceStep rounds a raw step up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// logTicks returns the powers of ten in [lo, hi], and when fewer than
// three of them, the 2s and 5s between as well.
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		if t := math.Pow(10, e); t >= lo && t <= hi {
			out = append(out, t)
		}
	}
	if len(out) >= 3 {
		return out
	}
	out = out[:0]
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for _, m := range []float64{1, 2, 5} {
			if t := m * math.Pow(10, e); t >= lo && t <= hi {
				out = append(out, t)
			}
		}
	}
	return out
}

func formatter(f func(float64) string) func(float64) string {
	if f == nil {
		return compact
	}
	return f
}

// compact writes a number with an SI suffix and at most three
// significant digits: 950, 1.5k, 23.4M.
func compact(v float64) string {
	a := math.Abs(v)
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if a >= u.div {
			return strconv.FormatFloat(round3(v/u.div), 'f', -1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(round3(v), 'f', -1, 64)
}

// round3 rounds to three significant digits.
func round3(v float64) float64 {
	if v == 0 {
		return 0
	}
	mag := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*mag) / mag
}

// Compact is the default number format: an SI suffix and at most three
// significant digits.
func Compact(v float64) string { return compact(v) }

// textWidth estimates the width of s in the charts' font: about 0.58em
// a character on average for a proportional sans-serif.
func textWidth(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * 0.58
}

func maxWidth(ticks []float64, f func(float64) string, size float64) float64 {
	w := 0.0
	for _, t := range ticks {
		w = math.Max(w, textWidth(f(t), size))
	}
	return w
}

// markerColors tell a histogram's markers apart.
var markerColors = []string{"#d62728", "#9467bd", "#8c564b"}

func width(w int) int {
	if w <= 0 {
		return DefaultWidth
	}
	return w
}

func color(c string, i int) string {
	if c != "" {
		return c
	}
	return Palette[i%len(Palette)]
}

func minOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	m := vs[0]
	for _, v := range vs {
		m = math.Min(m, v)
	}
	return m
}

func maxOf(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		m = math.Max(m, v)
	}
	return m
}

// num writes a coordinate with two decimals at most.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// raw writes a data value exactly: integers as integers.
func raw(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// esc escapes text and attribute values for XML and HTML alike.
func esc(s string) string { return html.EscapeString(s) }
