package svgchart

import (
	"encoding/xml"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// element is a parsed SVG element with its attributes and direct text.
type element struct {
	name  string
	attrs map[string]string
	text  string // a <text>'s own text, or the text of a <title> child
}

// parse checks that doc is well-formed XML with an <svg> root and
// returns every element in document order.
func parse(t *testing.T, doc string) []element {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	var out []element
	var stack []int
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if len(out) == 0 && tk.Name.Local != "svg" {
				t.Fatalf("root is <%s>, want <svg>", tk.Name.Local)
			}
			e := element{name: tk.Name.Local, attrs: map[string]string{}}
			for _, a := range tk.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) >= 2 && out[stack[len(stack)-1]].name == "title" {
				out[stack[len(stack)-2]].text += string(tk)
			} else if len(stack) >= 1 && out[stack[len(stack)-1]].name == "text" {
				out[stack[len(stack)-1]].text += string(tk)
			}
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements")
	}
	return out
}

func marks(es []element) []element {
	var out []element
	for _, e := range es {
		if e.attrs["class"] == "mark" {
			out = append(out, e)
		}
	}
	return out
}

func TestLineMarksCarryEveryValue(t *testing.T) {
	c := Line{ID: "tp", Title: `a "quoted" <title> & more`, XLabel: "seconds", YLabel: "per second", X: []float64{1, 2, 3},
		Series: []Series{{Name: "admitted", Values: []float64{10, 2500, 7}}, {Name: "rejected", Values: []float64{0, 3, 1}}},
		Area:   true, Refs: []Ref{{Label: "limit", Value: 3000}}}
	doc := c.SVG()
	es := parse(t, doc)
	if es[0].attrs["id"] != "tp" || es[0].attrs["viewBox"] == "" {
		t.Fatalf("root attributes %v", es[0].attrs)
	}
	if strings.Contains(doc, "http") {
		t.Fatalf("the SVG names a URL:\n%s", doc)
	}
	got := map[string][]string{}
	for _, m := range marks(es) {
		got[m.attrs["data-series"]] = append(got[m.attrs["data-series"]], m.attrs["data-x"]+"="+m.attrs["data-value"])
		if !strings.HasPrefix(m.text, m.attrs["data-series"]+" at ") || !strings.HasSuffix(m.text, ": "+m.attrs["data-value"]) {
			t.Errorf("mark title %q does not name its series and exact value", m.text)
		}
	}
	want := map[string][]string{"admitted": {"1=10", "2=2500", "3=7"}, "rejected": {"1=0", "2=3", "3=1"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("marks %v, want %v", got, want)
	}
	// The y axis reaches the reference line, which lies inside the plot.
	var ref element
	for _, e := range es {
		if e.attrs["class"] == "ref" {
			ref = e
		}
	}
	if ref.attrs["data-value"] != "3000" {
		t.Fatalf("reference line %v", ref.attrs)
	}
	if y, _ := strconv.ParseFloat(ref.attrs["y1"], 64); y < marginTop || y > 300-48 {
		t.Fatalf("reference line at y=%v, outside the plot", y)
	}
	for _, label := range []string{"seconds", "per second", "admitted", "rejected"} {
		if !hasText(doc, label) {
			t.Errorf("no text %q", label)
		}
	}
}

func hasText(doc, s string) bool { return strings.Contains(doc, ">"+s+"</text>") }

func TestBarsAreProportionalAndLabeled(t *testing.T) {
	c := Bars{ID: "rej", ValueLabel: "rejections", Categories: []string{"capacity-exhausted", "principal-not-authorized", "zero"},
		Series: []Series{{Values: []float64{400, 100, 0}}}, Colors: []string{"#111111"}}
	doc := c.SVG()
	ms := marks(parse(t, doc))
	if len(ms) != 3 {
		t.Fatalf("%d marks, want 3", len(ms))
	}
	w := func(e element) float64 { v, _ := strconv.ParseFloat(e.attrs["width"], 64); return v }
	if r := w(ms[0]) / w(ms[1]); math.Abs(r-4) > 0.01 {
		t.Errorf("bar widths %v and %v, want a ratio of 4", w(ms[0]), w(ms[1]))
	}
	if w(ms[2]) != 0 {
		t.Errorf("a zero bar is %v wide", w(ms[2]))
	}
	if ms[0].attrs["fill"] != "#111111" || ms[1].attrs["fill"] != Palette[0] {
		t.Errorf("colors %q %q", ms[0].attrs["fill"], ms[1].attrs["fill"])
	}
	for i, want := range []string{"capacity-exhausted=400", "principal-not-authorized=100", "zero=0"} {
		if got := ms[i].attrs["data-label"] + "=" + ms[i].attrs["data-value"]; got != want {
			t.Errorf("mark %d is %s, want %s", i, got, want)
		}
		if got := strings.Replace(ms[i].text, ": ", "=", 1); got != want {
			t.Errorf("mark %d's title is %q, want %s", i, ms[i].text, want)
		}
	}
	for _, s := range []string{"capacity-exhausted", "400", "100", "rejections"} {
		if !hasText(doc, s) {
			t.Errorf("no text %q", s)
		}
	}
}

func TestGroupedBars(t *testing.T) {
	c := Bars{ID: "res", Categories: []string{"goroutines", "threads"},
		Series: []Series{{Name: "before", Values: []float64{5, 9}}, {Name: "after", Values: []float64{4, 11}}}}
	ms := marks(parse(t, c.SVG()))
	var got []string
	for _, m := range ms {
		got = append(got, m.attrs["data-label"]+"/"+m.attrs["data-series"]+"="+m.attrs["data-value"])
	}
	want := []string{"goroutines/before=5", "goroutines/after=4", "threads/before=9", "threads/after=11"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("marks %v, want %v", got, want)
	}
}

func TestHistogramOnLogScales(t *testing.T) {
	bs := []Bucket{{Lo: 1000, Hi: 2000, Count: 100000}, {Lo: 2000, Hi: 4000, Count: 10}, {Lo: 4000, Hi: 8000, Count: 0}, {Lo: 8000, Hi: 16000, Count: 1}}
	c := Histogram{ID: "lat", XLabel: "latency", YLabel: "samples", Buckets: bs, LogY: true,
		Markers: []Ref{{Label: "p50", Value: 1500}, {Label: "p99.9", Value: 12000}}}
	doc := c.SVG()
	es := parse(t, doc)
	ms := marks(es)
	if len(ms) != len(bs) {
		t.Fatalf("%d marks, want %d", len(ms), len(bs))
	}
	f := func(e element, k string) float64 { v, _ := strconv.ParseFloat(e.attrs[k], 64); return v }
	// Log x: every doubling is the same width.
	if a, b := f(ms[0], "width"), f(ms[3], "width"); math.Abs(a-b) > 0.02 {
		t.Errorf("bucket widths %v and %v differ on a log axis", a, b)
	}
	// Log y: a single sample is visible, and 10 samples stand at about
	// 2/(5+0.3) of 100000's height (ticks 1..100000, floor at 0.5).
	h0, h1, h3 := f(ms[0], "height"), f(ms[1], "height"), f(ms[3], "height")
	if h3 <= 0 {
		t.Errorf("a single sample has height %v", h3)
	}
	if r, want := h1/h0, (1+math.Log10(2))/(5+math.Log10(2)); math.Abs(r-want) > 0.01 {
		t.Errorf("height ratio %v, want %v", r, want)
	}
	if f(ms[2], "height") != 0 || ms[2].attrs["data-count"] != "0" {
		t.Errorf("the empty bucket %v", ms[2].attrs)
	}
	var total uint64
	for _, m := range ms {
		n, _ := strconv.ParseUint(m.attrs["data-count"], 10, 64)
		total += n
	}
	if total != 100011 {
		t.Errorf("counts add up to %d", total)
	}
	var markers []string
	for _, e := range es {
		if e.attrs["class"] == "marker" {
			markers = append(markers, e.attrs["data-label"]+"="+e.attrs["data-value"])
		}
	}
	if !reflect.DeepEqual(markers, []string{"p50=1500", "p99.9=12000"}) {
		t.Errorf("markers %v", markers)
	}
	for _, s := range []string{"1k", "10k", "100k", "latency", "samples", "p50 1.5k"} {
		if !hasText(doc, s) {
			t.Errorf("no text %q", s)
		}
	}
}

func TestEmptyChartsAreStillWellFormed(t *testing.T) {
	for _, doc := range []string{Line{ID: "a"}.SVG(), Bars{ID: "b"}.SVG(), Histogram{ID: "c"}.SVG(),
		Line{ID: "d", X: []float64{1}, Series: []Series{{Name: "one", Values: []float64{0}}}}.SVG()} {
		parse(t, doc)
		if strings.Contains(doc, "NaN") || strings.Contains(doc, "Inf") {
			t.Errorf("a coordinate is not finite:\n%s", doc)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 97, []float64{0, 20, 40, 60, 80, 100}},
		{0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 0, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 1234567, []float64{0, 250000, 500000, 750000, 1000000, 1250000}},
	} {
		if got := niceTicks(c.lo, c.hi, 5); !reflect.DeepEqual(got, c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got, want := logTicks(512, 2e6), []float64{1000, 10000, 100000, 1e6}; !reflect.DeepEqual(got, want) {
		t.Errorf("logTicks = %v, want %v", got, want)
	}
	if got, want := logTicks(150, 3000), []float64{200, 500, 1000, 2000}; !reflect.DeepEqual(got, want) {
		t.Errorf("logTicks = %v, want %v", got, want)
	}
	for v, want := range map[float64]string{0: "0", 950: "950", 1500: "1.5k", 23449999: "23.4M", 1e9: "1G", 0.25: "0.25"} {
		if got := compact(v); got != want {
			t.Errorf("compact(%v) = %q, want %q", v, got, want)
		}
	}
}

// Category names stay inside the chart: beside their bars when they fit,
// above them when they are long.
func TestBarLabelsStayInside(t *testing.T) {
	for _, cats := range [][]string{{"goroutines", "threads"}, {"unsupported-execution-requirement", "placement-not-compatible"}} {
		doc := Bars{ID: "b", Categories: cats, Series: []Series{{Values: []float64{3, 1}}}}.SVG()
		var n int
		for _, e := range parse(t, doc) {
			if e.attrs["class"] != "category" {
				continue
			}
			n++
			x, _ := strconv.ParseFloat(e.attrs["x"], 64)
			w := textWidth(e.text, fontSize)
			lo, hi := x, x+w
			if e.attrs["text-anchor"] == "end" {
				lo, hi = x-w, x
			}
			if lo < 0 || hi > DefaultWidth {
				t.Errorf("label %q spans [%v, %v], outside [0, %d]", e.text, lo, hi, DefaultWidth)
			}
		}
		if n != len(cats) || !strings.Contains(doc, ">"+cats[0]+"</text>") {
			t.Errorf("%d category labels, want %d", n, len(cats))
		}
	}
}
