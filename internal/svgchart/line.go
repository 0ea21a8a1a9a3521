package svgchart

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

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
	yticks := valueTicks(c.Series, c.Refs)
	ymax := yticks[len(yticks)-1]
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
