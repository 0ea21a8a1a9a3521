package svgchart

import (
	"math"
	"strconv"
)

// This file is the axis arithmetic: round tick values and data ranges.

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

// valueTicks are the ticks of a value axis from zero that holds every
// value of series and every reference line.
func valueTicks(series []Series, refs []Ref) []float64 {
	top := 0.0
	for _, se := range series {
		top = math.Max(top, maxOf(se.Values))
	}
	for _, r := range refs {
		top = math.Max(top, r.Value)
	}
	return niceTicks(0, top, 5)
}
