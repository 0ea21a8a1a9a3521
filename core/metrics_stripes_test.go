package core

import (
	"sync"
	"testing"
)

// Every increment is counted exactly, from many goroutines at once, and
// every stripe is summed: keys whose last byte differs spread the
// increments over all of them, and one key always lands on one stripe.
func TestStripedCountersAreExact(t *testing.T) {
	m := newMetrics()
	const goroutines, each = 8, 5000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m.inc(leakedCounter, string([]byte{'a', byte(g), byte(i)}))
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
	// The stripe is the key's length plus its last byte, and the empty
	// key's is the first.
	for _, tc := range []struct {
		key    string
		stripe int
	}{{"", 0}, {"a", (1 + 'a') % metricStripes}, {"over-1", (6 + '1') % metricStripes}, {"over-2", (6 + '2') % metricStripes}} {
		m := newMetrics()
		m.inc(firstRejection, tc.key)
		if m.counters[tc.stripe*perStripe+firstRejection].n.Load() != 1 {
			t.Errorf("key %q did not land on stripe %d", tc.key, tc.stripe)
		}
	}
}
