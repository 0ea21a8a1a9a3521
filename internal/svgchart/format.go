package svgchart

import (
	"math"
	"strconv"
)

// This file is the default number format of ticks and labels.

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
