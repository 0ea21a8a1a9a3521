package core

import (
	"sync"
	"testing"
)

// Goroutines that count at once, all the same event, are counted exactly
// and spread over more than one stripe: the stripe follows the goroutine,
// not what its requests carry (the parallel reject workload's requests
// share one activation ID, which put every core on one line).
func TestStripedCountersAreExact(t *testing.T) {
	m := newMetrics()
	const goroutines, each = 8, 5000
	var started, wg sync.WaitGroup
	started.Add(goroutines)
	release := make(chan struct{})
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			// Every goroutine is alive, on its own stack, before any
			// counts, so no stack is reused by the next goroutine.
			<-release
			for range each {
				m.inc(leakedCounter)
			}
		}()
	}
	started.Wait()
	close(release)
	wg.Wait()
	if got := m.value(leakedCounter); got != goroutines*each {
		t.Fatalf("counted %d, want %d", got, goroutines*each)
	}
	used := 0
	for stripe := range metricStripes {
		if m.counters[stripe*perStripe+leakedCounter].n.Load() != 0 {
			used++
		}
	}
	if used < 2 {
		t.Errorf("%d goroutines counted on %d stripe(s), want them spread", goroutines, used)
	}
	if got := m.value(firstRejection); got != 0 {
		t.Errorf("another counter moved: %d", got)
	}
}
