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
