package svgchart

import (
	"fmt"
	"math"
	"strconv"
)

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

// markerColors tell a histogram's markers apart.
var markerColors = []string{"#d62728", "#9467bd", "#8c564b"}
