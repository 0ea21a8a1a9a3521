package core

import (
	"math"
	"testing"
	"time"
)

// TestSaturatingArithmetic: the fleet's time arithmetic is exact inside
// the int64 range and sticks to its ends outside it.
func TestSaturatingArithmetic(t *testing.T) {
	for _, c := range []struct {
		a    int64
		b    time.Duration
		want int64
	}{
		{1, 2, 3}, {math.MaxInt64 - 1, 1, math.MaxInt64}, {math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 5, 10, math.MaxInt64}, {-7, 0, -7},
	} {
		if got := addSaturating(c.a, c.b); got != c.want {
			t.Errorf("addSaturating(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	for _, c := range []struct{ a, b, want int64 }{
		{5, 3, 2}, {3, 5, -2}, {-3, -5, 2}, {4, 0, 4},
		{math.MaxInt64, -1, math.MaxInt64}, {0, math.MinInt64, math.MaxInt64},
		{math.MinInt64, 1, math.MinInt64}, {-2, math.MaxInt64, math.MinInt64},
		{math.MaxInt64, math.MaxInt64, 0}, {-1, math.MaxInt64, math.MinInt64},
	} {
		if got := subSaturating(c.a, c.b); got != c.want {
			t.Errorf("subSaturating(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
