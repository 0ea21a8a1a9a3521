package svgchart

import (
	"fmt"
	"math"
	"strconv"
)

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

// SVG returns the chart as one <svg> element.
func (c Bars) SVG() string {
	fv := formatter(c.FormatValue)
	n := max(1, len(c.Series))
	ticks := valueTicks(c.Series, c.Refs)
	vmax := ticks[len(ticks)-1]
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
