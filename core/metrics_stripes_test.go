package core

import (
	"sync"
	"testing"
)

// Every increment is counted exactly, from many goroutines at once, and
// every stripe is summed: the increments spread over all of them.
func TestStripedCountersAreExact(t *testing.T) {
	m := newMetrics()
	const goroutines, each = 8, 5000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				m.inc(leakedCounter)
			}
		}()
	}
	wg.Wait()
	if got := m.value(leakedCounter); got != goroutines*each {
		t.Fatalf("counted %d, want %d", got, goroutines*each)
	}
	for stripe := range metricStripes {
		if m.counters[stripe*perStripe+leakedCounter].n.Load() == 0 {
			t.Errorf("stripe %d got none of %d increments", stripe, goroutines*each)
		}
	}
	if got := m.value(firstRejection); got != 0 {
		t.Errorf("another counter moved: %d", got)
	}
}
