package scheduler

import (
	"testing"
	"time"
)

// Recording a wait is a few atomic adds: no allocation, whatever bucket.
func TestObservingAWaitAllocatesNothing(t *testing.T) {
	var h waitHistogram
	waits := []time.Duration{-time.Second, 0, time.Millisecond, 3 * time.Millisecond, time.Minute}
	i := 0
	if allocs := testing.AllocsPerRun(1000, func() {
		h.observe(waits[i%len(waits)])
		i++
	}); allocs != 0 {
		t.Errorf("observe allocates %v times, want 0", allocs)
	}
}

// Each wait lands in the first bucket whose bound is at or above it; a
// bound is inclusive, a wait past the last bound is only in +Inf, and a
// negative wait counts as zero.
func TestWaitBuckets(t *testing.T) {
	var h waitHistogram
	for _, d := range []time.Duration{-time.Second, 0, time.Millisecond, time.Millisecond + 1, 30 * time.Second, time.Hour} {
		h.observe(d)
	}
	got := h.snapshot("q")
	if got.QueueClass != "q" || got.Count != 6 || got.Sum != time.Millisecond+time.Millisecond+1+30*time.Second+time.Hour {
		t.Fatalf("snapshot %+v", got)
	}
	want := make([]uint64, len(queueWaitBounds))
	for i := range want {
		switch {
		case i == 0:
			want[i] = 3 // -1s (as 0), 0, 1ms
		case i < len(want)-1:
			want[i] = 4 // 1ms+1ns from the 2.5ms bucket on
		default:
			want[i] = 5 // 30s, the last bound
		}
	}
	for i := range want {
		if got.Cumulative[i] != want[i] {
			t.Fatalf("cumulative %v, want %v", got.Cumulative, want)
		}
	}
	if len(got.Bounds) != len(queueWaitBounds) || got.Bounds[len(got.Bounds)-1] != 30*time.Second {
		t.Errorf("bounds %v", got.Bounds)
	}
}
