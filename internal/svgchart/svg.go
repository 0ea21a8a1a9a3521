package svgchart

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// This file is the SVG writer: elements, axes, text metrics and the
// number formats of coordinates and data attributes.

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

// num writes a coordinate with two decimals at most.
func num(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// raw writes a data value exactly: integers as integers.
func raw(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// esc escapes text and attribute values for XML and HTML alike.
func esc(s string) string { return html.EscapeString(s) }
