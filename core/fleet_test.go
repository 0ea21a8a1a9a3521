package core

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// fleetPatience bounds the waits of the fleet tests on a loaded machine.
const fleetPatience = 2 * time.Minute

// acmeFleet marks acme fleet-limited.
func acmeFleet(p *policy.NodeAdmissionPolicy) { p.Fleet.Tenants = []string{"acme"} }

// newFleetFixture is the example fixture with acme fleet-limited.
func newFleetFixture(t testing.TB) *fixture { return newFixture(t, acmeFleet) }

func (f *fixture) publishSlice(t testing.TB, slice int64, untilMs int64) {
	t.Helper()
	require.NoError(t, f.provider.PublishFleetSlice("acme", slice, at(untilMs)))
}

func wantFleetFull(t testing.TB, err error) {
	t.Helper()
	wantError(t, err, CodeResourceExhausted, ScopeFleet, DimLiveActivations, ReasonCapacityExhausted, true)
}

func wantFleetUnavailable(t testing.TB, err error) {
	t.Helper()
	wantError(t, err, CodeUnavailable, ScopeFleet, DimFleetSlice, ReasonFleetUnavailable, true)
}

func TestFleetVocabulary(t *testing.T) {
	wantFleetFull(t, errFleetFull.err())
	wantFleetUnavailable(t, errFleetUnavailable.err())
	wantError(t, ErrFleetSliceRejected, CodeInvalidArgument, ScopeFleet, DimFleetSlice, ReasonFleetSliceRejected, false)
	assert.Equal(t, "admission.limit: resource-exhausted scope=fleet dimension=live-activations reason=capacity-exhausted retryable=true",
		errFleetFull.err().Error())
	assert.Equal(t, "admission.limit: unavailable scope=fleet dimension=fleet-slice reason=fleet-unavailable retryable=true",
		errFleetUnavailable.err().Error())
	assert.Contains(t, AllErrors(), errFleetFull.err())
	assert.Contains(t, AllErrors(), errFleetUnavailable.err())
	assert.Contains(t, Reasons(), ReasonFleetUnavailable)
}

// A tenant the policy does not mark behaves as before: no slice is read,
// and none can be published for it.
func TestFleetUnmarkedTenantsAreUnaffected(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "plain", 0)
	p.Release()
	assert.Equal(t, ErrFleetSliceRejected, f.provider.PublishFleetSlice("acme", 5, at(1000)))
	assert.Equal(t, ErrFleetSliceRejected, f.provider.PublishFleetSlice("nobody", 5, at(1000)))
	assert.False(t, f.provider.WithdrawFleetSlice("acme"))
	_, _, _, ok := f.provider.FleetSlice("acme")
	assert.False(t, ok)

	// Marking acme leaves globex alone.
	g := newFleetFixture(t)
	_, _, _, ok = g.provider.FleetSlice("globex")
	assert.False(t, ok)
	assert.Equal(t, ErrFleetSliceRejected, g.provider.PublishFleetSlice("globex", 5, at(1000)))
}

// A marked tenant with no slice published (no broker) is refused, and the
// refusal moves nothing.
func TestFleetFailsClosedWithoutASlice(t *testing.T) {
	f := newFleetFixture(t)
	_, err := f.ctl.AdmitAt(request("a"), at(0))
	wantFleetUnavailable(t, err)
	f.isZero(t)
	_, _, published, ok := f.provider.FleetSlice("acme")
	assert.True(t, ok)
	assert.False(t, published)
}

// Exactly full, one below, and the deadline: now == deadline is expired.
func TestFleetBoundaries(t *testing.T) {
	f := newFleetFixture(t)
	f.publishSlice(t, 2, 1000)
	a := admit(t, f, "a", 0) // live 0 + 1 <= 2
	b := admit(t, f, "b", 0) // live 1 + 1 <= 2: the slice exactly full
	_, err := f.ctl.AdmitAt(request("c"), at(0))
	wantFleetFull(t, err)
	require.True(t, a.Release())
	c := admit(t, f, "c", 999) // one below again, a nanosecond-free ms before the deadline
	_, err = f.ctl.AdmitAt(request("d"), at(0))
	wantFleetFull(t, err)
	require.True(t, b.Release())
	_, err = f.ctl.AdmitAt(request("d"), at(1000)) // now == deadline
	wantFleetUnavailable(t, err)
	_, err = f.ctl.AdmitAt(request("d"), at(1000).Add(-time.Nanosecond).Add(time.Nanosecond))
	wantFleetUnavailable(t, err)
	d, err := f.ctl.AdmitAt(request("d"), at(1000).Add(-time.Nanosecond))
	require.NoError(t, err, "a nanosecond before the deadline")
	d.Release()
	c.Release()
	f.isZero(t)

	slice, until, published, ok := f.provider.FleetSlice("acme")
	assert.True(t, ok && published)
	assert.Equal(t, int64(2), slice)
	assert.True(t, until.Equal(at(1000)), "until %v", until)
}

// The fleet scope comes after the tenant's and before the trust class's.
func TestFleetIsCheckedAfterTheTenantScope(t *testing.T) {
	// Before the trust class: the fleet answers while the trust class is
	// full, and the trust class answers once the slice has room.
	g := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
		acmeFleet(p)
		p.TrustClasses[0].Limits.MaxLiveActivations = 0
	})
	_, err := g.ctl.AdmitAt(request("a"), at(0))
	wantFleetUnavailable(t, err)
	g.publishSlice(t, 0, 1000)
	_, err = g.ctl.AdmitAt(request("a"), at(0))
	wantFleetFull(t, err) // a slice of 0 is full, and retryable: it can grow
	g.publishSlice(t, 5, 1000)
	_, err = g.ctl.AdmitAt(request("a"), at(0))
	wantError(t, err, CodeResourceExhausted, ScopeTrustClass, DimLiveActivations, ReasonCapacityExhausted, false)
	// After the tenant: the tenant's own limit answers first.
	h := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
		acmeFleet(p)
		p.Tenants[0].Limits.MaxLiveActivations = 0
	})
	_, err = h.ctl.AdmitAt(request("a"), at(0))
	wantError(t, err, CodeResourceExhausted, ScopeTenant, DimLiveActivations, ReasonCapacityExhausted, false)
}

// A slice lowered below the live count revokes nothing: the permits stay
// live and usable, and new work is refused until enough of it ends.
func TestFleetSliceLoweredBelowLive(t *testing.T) {
	f := newFleetFixture(t)
	f.publishSlice(t, 3, 10_000)
	held := []*AdmissionPermit{admit(t, f, "a", 0), admit(t, f, "b", 0), admit(t, f, "c", 0)}
	f.publishSlice(t, 1, 10_000)
	_, err := f.ctl.AdmitAt(request("d"), at(0))
	wantFleetFull(t, err)
	snap, _ := f.provider.TenantSnapshot("acme")
	assert.Equal(t, uint64(3), snap.Live, "nothing revoked")
	e, err := held[0].StartExecutionAt(at(1))
	require.NoError(t, err, "a permit admitted under the larger slice still starts")
	require.True(t, e.Release())
	_, err = f.ctl.AdmitAt(request("d"), at(2))
	wantFleetFull(t, err) // live 2 >= 1
	require.True(t, held[1].Release())
	_, err = f.ctl.AdmitAt(request("d"), at(2))
	wantFleetFull(t, err) // live 1 >= 1
	require.True(t, held[2].Release())
	d := admit(t, f, "d", 2)
	d.Release()
	f.isZero(t)
}

// A bad publish withdraws the slice (fail closed); a good one restores it.
func TestFleetPublishRefusals(t *testing.T) {
	f := newFleetFixture(t)
	f.publishSlice(t, 4, 1000)
	assert.Equal(t, ErrFleetSliceRejected, f.provider.PublishFleetSlice("acme", -1, at(1000)))
	_, err := f.ctl.AdmitAt(request("a"), at(0))
	wantFleetUnavailable(t, err)
	f.publishSlice(t, 4, 1000)
	admit(t, f, "a", 0).Release()
	for _, far := range []time.Time{{}, time.Unix(math.MaxInt64/4, 0)} {
		assert.Equal(t, ErrFleetSliceRejected, f.provider.PublishFleetSlice("acme", 4, far), "%v", far)
		_, err = f.ctl.AdmitAt(request("a"), at(0))
		wantFleetUnavailable(t, err)
		f.publishSlice(t, 4, 1000)
	}
	require.True(t, f.provider.WithdrawFleetSlice("acme"))
	_, err = f.ctl.AdmitAt(request("a"), at(0))
	wantFleetUnavailable(t, err)
	_, _, published, _ := f.provider.FleetSlice("acme")
	assert.False(t, published)
	// A slice of the largest int64 is a slice with room.
	require.NoError(t, f.provider.PublishFleetSlice("acme", math.MaxInt64, at(1000)))
	admit(t, f, "a", 0).Release()
}

// On the system clock (derived readings), a deadline from time.Now is
// judged by the monotonic clock.
func TestFleetOnTheSystemClock(t *testing.T) {
	p := basePolicy(t)
	acmeFleet(p)
	pr, err := NewLocalQuotaProvider(p)
	require.NoError(t, err)
	load := NewNodeLoadState(time.Hour, nil)
	require.NoError(t, load.Publish(LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}))
	src := &mapSource{}
	src.add(resizeRevision(), resizePolicy())
	ctl := pr.Controller(ControllerConfig{Source: src, Load: load})
	_, err = ctl.Admit(request("a"))
	wantFleetUnavailable(t, err)
	require.NoError(t, pr.PublishFleetSlice("acme", 1, time.Now().Add(time.Hour)))
	a, err := ctl.Admit(request("a"))
	require.NoError(t, err)
	_, err = ctl.Admit(request("b"))
	wantFleetFull(t, err)
	a.Release()
	require.NoError(t, pr.PublishFleetSlice("acme", 1, time.Now()))
	_, err = ctl.Admit(request("b"))
	wantFleetUnavailable(t, err)
}

// Both fleet rejections are answered before the mutex (the test holds it)
// and allocate nothing; an admitted cycle of a fleet tenant is still the
// permit's one allocation.
func TestFleetRejectionsArePreCheckedWithoutAllocating(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are exact only without -short's parallel noise")
	}
	f := newFleetFixture(t)
	req := request("doomed")
	wantWithMutexHeld := func(name string, check func(testing.TB, error)) {
		t.Helper()
		done := make(chan error, 1)
		waited := false
		f.provider.ledger.Update(func(atomicledger.Tx) {
			go func() { _, err := f.ctl.Admit(req); done <- err }()
			select {
			case err := <-done:
				check(t, err)
			case <-time.After(fleetPatience):
				waited = true
			}
		})
		if waited {
			<-done
			t.Fatalf("%s: the rejection waited for the ledger's mutex", name)
		}
		if n := testing.AllocsPerRun(100, func() { _, _ = f.ctl.Admit(req) }); n != 0 {
			t.Fatalf("%s: the rejection allocates %v objects", name, n)
		}
	}
	wantWithMutexHeld("no slice", wantFleetUnavailable)
	f.publishSlice(t, 1, 1000)
	held := admit(t, f, "held", 0)
	wantWithMutexHeld("full", wantFleetFull)
	f.clock.set(at(1000))
	wantWithMutexHeld("expired", wantFleetUnavailable)
	held.Release()

	f.clock.set(at(0))
	cycle := request("cycle")
	n := testing.AllocsPerRun(100, func() {
		p, err := f.ctl.Admit(cycle)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	assert.LessOrEqual(t, n, 1.0, "admit allocates %v objects", n)
}

// Many goroutines admit at once while a publisher flips between a small
// slice that is valid and a large one that has expired: a torn read (the
// large slice with the valid deadline) would admit past the small one.
// The tenant's live count, read by each worker while it holds a permit,
// never exceeds the small slice.
func TestFleetConcurrentAdmitsNeverExceedTheSlice(t *testing.T) {
	f := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
		acmeFleet(p)
		p.Tenants[0].Limits.MaxLiveActivations = 64
		p.Tenants[0].Limits.MaxQueuedReservations = 64
		p.Tenants[0].Limits.MaxReservedCPUFuel = math.MaxUint64
		p.Tenants[0].Limits.MaxReservedMemoryBytes = math.MaxUint64
		p.TrustClasses[0].Limits = p.Tenants[0].Limits
		p.Node.Limits = p.Tenants[0].Limits
		for i := range p.QueueClasses {
			p.QueueClasses[i].MaxQueued = 64
		}
	})
	const small, workers, rounds = 3, 16, 400
	// More threads than cores, so that the OS interleaves the workers
	// anywhere, not only where the Go scheduler would.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * workers))
	f.publishSlice(t, small, 1000)
	var most atomic.Int64
	stop := make(chan struct{})
	var publisher sync.WaitGroup
	publisher.Add(1)
	go func() {
		defer publisher.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = f.provider.PublishFleetSlice("acme", 50, at(-1))
			_ = f.provider.PublishFleetSlice("acme", small, at(1000))
		}
	}()
	var wg sync.WaitGroup
	admitted := atomic.Int64{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				p, err := f.ctl.Admit(request(fmt.Sprintf("w%d-%d", w, i)))
				if err != nil {
					var e Error
					if !errors.As(err, &e) || e.Scope() != ScopeFleet {
						t.Errorf("unexpected rejection %v", err)
						return
					}
					continue
				}
				admitted.Add(1)
				// The ledger's own count, read while this permit is held.
				snap, _ := f.provider.TenantSnapshot("acme")
				n := int64(snap.Live)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched() // hold it a while, so that admissions overlap
				p.Release()
			}
		}()
	}
	wg.Wait()
	close(stop)
	publisher.Wait()
	assert.LessOrEqual(t, most.Load(), int64(small), "the tenant's live count, read while holding a permit")
	assert.Positive(t, admitted.Load(), "nothing was admitted")
	f.isZero(t)
}

// The latch never hands out a slice of one publish with the deadline of
// another, whatever the interleaving.
func TestFleetEntryReadsWholePairs(t *testing.T) {
	var e fleetEntry
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			e.writeLocked(i, int64(i)*7)
			mu.Unlock()
		}
	}()
	deadline := time.Now().Add(fleetPatience)
	for n := 0; n < 200_000 && time.Now().Before(deadline); n++ {
		r := e.read()
		if r.slice != 0 && r.until != int64(r.slice)*7 {
			close(stop)
			wg.Wait()
			t.Fatalf("torn read: slice %d until %d", r.slice, r.until)
		}
	}
	close(stop)
	wg.Wait()
}

// A recorded commit records the slice it judged.
func TestFleetRecordedCommitRecordsTheSlice(t *testing.T) {
	f, _ := newRecordingFixture(t, acmeFleet)
	f.clock.set(at(0))
	_, rec, err := admitRecorded(f.ctl, request("a"))
	wantFleetUnavailable(t, err)
	assert.True(t, rec.fleetRead)
	assert.Equal(t, FleetReading{Remaining: rec.fleet.Remaining}, rec.fleet)
	f.publishSlice(t, 3, 1000)
	assert.Equal(t, ErrFleetSliceRejected, f.provider.PublishFleetSlice("acme", -1, at(1000)))
	f.publishSlice(t, 2, 1000)
	p, rec, err := admitRecorded(f.ctl, request("a"))
	require.NoError(t, err)
	assert.True(t, rec.fleetRead)
	assert.Equal(t, FleetReading{Published: true, Slice: 2, Remaining: time.Second, Writes: 3}, rec.fleet)
	p.Release()
	// A tenant that is not fleet-limited reads none.
	g, _ := newRecordingFixture(t, nil)
	g.clock.set(at(0))
	p, rec, err = admitRecorded(g.ctl, request("a"))
	require.NoError(t, err)
	assert.False(t, rec.fleetRead)
	p.Release()
}

// FleetRefused counts a tenant's refusals for a full slice, whether the
// pre-check or the transaction gave them, and nothing else: what a broker
// reads to state the node's wants.
func TestFleetRefusedCountsFullSlices(t *testing.T) {
	f, _ := newRecordingFixture(t, func(p *policy.NodeAdmissionPolicy) {
		p.Fleet.Tenants = []string{"acme", "globex"}
	})
	count := func(tenant string) uint64 {
		t.Helper()
		n, ok := f.provider.FleetRefused(tenant)
		require.True(t, ok)
		return n
	}
	_, err := f.ctl.AdmitAt(request("a"), at(0))
	wantFleetUnavailable(t, err)
	assert.Zero(t, count("acme"), "a missing slice is not a full one")
	f.publishSlice(t, 1, 1000)
	held := admit(t, f, "a", 0)
	for i := range 5 {
		_, err = f.ctl.AdmitAt(request(fmt.Sprint("over-", i)), at(0)) // the pre-check's
		wantFleetFull(t, err)
	}
	_, rec, err := admitRecorded(f.ctl, request("recorded")) // the transaction's
	wantFleetFull(t, err)
	require.True(t, rec.committed)
	assert.Equal(t, uint64(6), count("acme"))
	assert.Zero(t, count("globex"), "another tenant's refusals")
	_, ok := newFixture(t, nil).provider.FleetRefused("acme")
	assert.False(t, ok, "a tenant that is not fleet-limited")
	held.Release()
	if n := testing.AllocsPerRun(10, func() { _, _ = f.provider.FleetRefused("acme") }); n != 0 {
		t.Fatalf("FleetRefused allocates %v objects", n)
	}
}

// A publish, a refused publish and a withdrawal allocate nothing: each
// writes its latch with the ledger's mutex held, through a closure that
// does not escape.
func TestFleetPublishAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are exact only without -short's parallel noise")
	}
	f := newFleetFixture(t)
	until := time.Now().Add(time.Hour)
	for name, write := range map[string]func(){
		"publish":         func() { _ = f.provider.PublishFleetSlice("acme", 3, until) },
		"refused publish": func() { _ = f.provider.PublishFleetSlice("acme", -1, until) },
		"withdrawal":      func() { _ = f.provider.WithdrawFleetSlice("acme") },
	} {
		if n := testing.AllocsPerRun(100, write); n != 0 {
			t.Errorf("a %s allocates %v objects", name, n)
		}
	}
}
