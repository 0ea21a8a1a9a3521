package core

import (
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"latent.dev/admission/core/atomicledger"
)

// collectUntil runs the collector until cond holds, at most n times.
func collectUntil(n int, cond func() bool) bool {
	for i := 0; i < n; i++ {
		if cond() {
			return true
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// TestPermitHeldAcrossCollectionsIsReclaimedWhenDropped: a permit that
// outlives several sweeps (and so was given its finalizer by one) is
// still reclaimed and counted once its holder drops it.
func TestPermitHeldAcrossCollectionsIsReclaimedWhenDropped(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "held", 0)
	slot := &f.provider.young.slots[p.state().ticket.Slot]
	if !collectUntil(200, func() bool { return slot.Load() == nil }) {
		t.Fatal("no sweep took the held permit out of the young table")
	}
	time.Sleep(10 * time.Millisecond) // the sweep sets the finalizer just after taking the permit out
	if !p.Live() || f.provider.Metrics().Leaked != 0 {
		t.Fatal("a held permit was reclaimed")
	}
	p = nil
	if !collectUntil(200, func() bool { return f.provider.Metrics().Leaked == 1 }) {
		t.Fatalf("leaked = %d, want 1", f.provider.Metrics().Leaked)
	}
	f.isZero(t)
}

// TestReleasedPermitIsFreedByOneCollection: a released permit holds no
// finalizer, whether it was released before the first sweep (it never
// got one) or after (its release removed the one the sweep set), so the
// first collection that finds it unreachable frees it. A finalizer would
// keep it for one more.
func TestReleasedPermitIsFreedByOneCollection(t *testing.T) {
	f := newFixture(t, nil)
	for _, swept := range []bool{false, true} {
		p := admit(t, f, "freed", 0)
		if swept {
			slot := &f.provider.young.slots[p.state().ticket.Slot]
			if !collectUntil(200, func() bool { return slot.Load() == nil }) {
				t.Fatal("no sweep took the permit out of the young table")
			}
			time.Sleep(10 * time.Millisecond) // let the sweep finish setting the finalizer
		}
		w := weak.Make(p)
		if !p.Release() {
			t.Fatal("release returned nothing")
		}
		p = nil
		runtime.GC()
		if w.Value() != nil {
			t.Fatalf("swept %v: a released permit survived the collection that found it unreachable", swept)
		}
	}
	if f.provider.Metrics().Leaked != 0 {
		t.Fatal("a released permit was counted as leaked")
	}
	f.isZero(t)
}

// TestStartFailureLeavesNothingToReclaim: a permit whose StartExecution
// found its deadline passed is released; dropping it counts no leak.
func TestStartFailureLeavesNothingToReclaim(t *testing.T) {
	f := newFixture(t, nil)
	func() {
		p := admit(t, f, "late", 0)
		if _, err := p.StartExecutionAt(at(60_000)); err == nil {
			t.Fatal("started past its deadline")
		}
	}()
	collectUntil(5, func() bool { return false })
	if f.provider.Metrics().Leaked != 0 {
		t.Fatal("a permit released by a failed start was counted as leaked")
	}
	f.isZero(t)
}

// TestDroppedProviderStopsItsTick: the per-collection tick holds its
// young table weakly, so a provider that is gone leaves no tick behind
// (many providers in one process must not accumulate work per
// collection).
func TestDroppedProviderStopsItsTick(t *testing.T) {
	before := ticking.Load()
	func() {
		for i := 0; i < 3; i++ {
			f := newFixture(t, nil)
			admit(t, f, "x", 0).Release()
		}
	}()
	if !collectUntil(200, func() bool { return ticking.Load() <= before }) {
		t.Fatalf("%d ticks still armed, want at most %d", ticking.Load(), before)
	}
}

// TestCountersAreExact: increments from many goroutines at once land on
// their own counter, each counted exactly over every stripe.
func TestCountersAreExact(t *testing.T) {
	m := newMetrics()
	counters := firstRejection + len(allErrors)
	const goroutines = 64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := 0; c < counters; c++ {
				for i := 0; i <= c%5; i++ {
					m.inc(c)
				}
			}
		}()
	}
	wg.Wait()
	for c := 0; c < counters; c++ {
		if got, want := m.value(c), int64(goroutines*(c%5+1)); got != want {
			t.Fatalf("counter %d: %d, want %d", c, got, want)
		}
	}
}

var sinkBlock *permitBlock

// BenchmarkLeakTracking is what tracking one permit for leak reclaim
// costs on top of its allocation: a finalizer set at admission and
// removed at release (impl=finalizer, the former design), against holding
// it in the young table and clearing its slot (impl=young), and against
// runtime.AddCleanup at admission and Cleanup.Stop at release
// (impl=cleanup, the plainest form: its argument, which must not be
// reachable from the permit, is boxed, one more allocation per permit).
func BenchmarkLeakTracking(b *testing.B) {
	b.Run("impl=alloc-only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBlock = new(permitBlock)
		}
	})
	b.Run("impl=finalizer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			blk := new(permitBlock)
			runtime.SetFinalizer(&blk.permit, reclaimLeaked)
			runtime.SetFinalizer(&blk.permit, nil)
			sinkBlock = blk
		}
	})
	b.Run("impl=young", func(b *testing.B) {
		y := newYoungPermits(1)
		var tk atomicledger.Ticket // slot 0
		b.ReportAllocs()
		for b.Loop() {
			blk := new(permitBlock)
			y.hold(tk, blk)
			y.forget(tk, blk)
			sinkBlock = blk
		}
	})
	b.Run("impl=cleanup", func(b *testing.B) {
		type leak struct {
			provider *LocalQuotaProvider
			ticket   atomicledger.Ticket
		}
		var pr LocalQuotaProvider
		b.ReportAllocs()
		for b.Loop() {
			blk := new(permitBlock)
			c := runtime.AddCleanup(&blk.permit, func(l leak) { ledgerRelease(l.provider, l.ticket) }, leak{&pr, blk.state.ticket})
			c.Stop()
			sinkBlock = blk
		}
	})
}
