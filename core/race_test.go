package core

import (
	"fmt"
	"sync"
	"testing"
)

// The ledger's mutex serializes a permit's transactions, so of a
// StartExecution and a Release racing for one queued permit (two owners:
// a bug in the embedder) exactly one takes it, and the ledger returns to
// zero once whatever was started is released.
func TestStartAndReleaseRacingForOnePermit(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 300 {
		p := admit(t, f, fmt.Sprint("race-", i), 0)
		var x *ExecutionPermit
		var startErr error
		var released bool
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); x, startErr = p.StartExecution() }()
		go func() { defer wg.Done(); released = p.Release() }()
		wg.Wait()
		switch {
		case startErr == nil && released:
			t.Fatalf("round %d: both the start and the release took the permit", i)
		case startErr != nil && !released:
			t.Fatalf("round %d: neither took the permit: %v", i, startErr)
		case startErr == nil:
			if !x.Live() || !x.Release() {
				t.Fatalf("round %d: the started permit held nothing", i)
			}
		}
		f.isZero(t)
	}
}
