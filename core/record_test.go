package core

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// ledgerRelease releases tk in a transaction of its own, as a leaked
// permit's reclaim does.
func ledgerRelease(p *LocalQuotaProvider, tk atomicledger.Ticket) (ok bool) {
	p.ledger.Update(func(tx atomicledger.Tx) { ok = tx.Release(tk) })
	return ok
}

// moveLog is a Journal that keeps every move.
type moveLog struct {
	mu    sync.Mutex
	moves []LedgerMove
}

func (j *moveLog) Moved(m LedgerMove) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.moves = append(j.moves, m)
}

func (j *moveLog) all() []LedgerMove {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]LedgerMove(nil), j.moves...)
}

// newRecordingFixture is newFixture on a recording provider.
func newRecordingFixture(t testing.TB, mutate func(*policy.NodeAdmissionPolicy)) (*fixture, *moveLog) {
	t.Helper()
	p := basePolicy(t)
	if mutate != nil {
		mutate(p)
	}
	journal := &moveLog{}
	provider, err := NewRecordingProvider(p, journal)
	require.NoError(t, err)
	clock := &fakeClock{now: epoch}
	f := &fixture{provider: provider, load: NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, clock),
		source: &mapSource{}, clock: clock}
	f.source.add(resizeRevision(), resizePolicy())
	f.ctl = provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: f.clock})
	f.publish(t, 1, 0, 0.5, 0.5)
	return f, journal
}

func TestRecordingProviderRecordsWhatADecisionDependedOn(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	require.NotZero(t, f.provider.NextOrder(), "a recording provider draws orders")
	sample, _ := f.load.CurrentLoad()

	f.clock.set(at(7))
	var rec DecisionRecord
	p, err := f.ctl.AdmitRecorded(request("a-1"), &rec)
	require.NoError(t, err)
	assert.True(t, rec.First.Equal(at(7)), "first reading %v", rec.First)
	assert.True(t, rec.Committed)
	assert.NotZero(t, rec.Order)
	assert.Equal(t, 1, rec.Reads, "the commit's resample")
	assert.Equal(t, time.Duration(0), rec.Since[0])
	assert.Same(t, sample, rec.Load)
	assert.Same(t, sample, rec.CommitLoad)

	// A duplicate is decided at the commit, after the admission.
	var dup DecisionRecord
	_, err = f.ctl.AdmitRecorded(request("a-1"), &dup)
	wantError(t, err, CodeAlreadyExists, ScopeRequest, DimActivationID, ReasonActivationIDUnavailable, false)
	assert.True(t, dup.Committed)
	assert.Greater(t, dup.Order, rec.Order)

	// A rejection before the clock: no reading, no commit, an order all
	// the same (it is placed among the ledger's transactions).
	bad := request("a-2")
	bad.Principal.Subject = "mallory"
	var denied DecisionRecord
	_, err = f.ctl.AdmitRecorded(bad, &denied)
	require.Error(t, err)
	assert.True(t, denied.First.IsZero())
	assert.False(t, denied.Committed)
	assert.Nil(t, denied.Load)
	assert.Greater(t, denied.Order, dup.Order)

	// Start and release are journaled with their own orders, after the
	// admission, with the time since the admission's reading.
	f.clock.set(at(10))
	e, err := p.StartExecution()
	require.NoError(t, err)
	f.clock.set(at(25))
	require.True(t, e.Release())
	moves := journal.all()
	require.Len(t, moves, 2)
	assert.Equal(t, LedgerMove{Kind: MoveStarted, Order: moves[0].Order, Admission: rec.Order, Elapsed: 3 * time.Millisecond}, moves[0])
	assert.Equal(t, LedgerMove{Kind: MoveReleased, Order: moves[1].Order, Admission: rec.Order, Elapsed: 18 * time.Millisecond}, moves[1])
	assert.Greater(t, moves[0].Order, denied.Order)
	assert.Greater(t, moves[1].Order, moves[0].Order)
	assert.False(t, e.Release(), "a second release")
	assert.Len(t, journal.all(), 2, "a second release moves nothing and is not journaled")
	f.isZero(t)
}

func TestRecordingJournalsARefusedStartAndAQueuedRelease(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	var rec DecisionRecord
	p, err := f.ctl.AdmitRecorded(request("late"), &rec)
	require.NoError(t, err)
	f.clock.set(at(10 * 60 * 1000)) // far past any deadline
	_, err = p.StartExecution()
	require.ErrorIs(t, err, ErrPermitDeadlineExceeded)

	f.publish(t, 2, 10*60*1000, 0.5, 0.5)
	q, err := f.ctl.AdmitRecorded(request("queued"), &rec)
	require.NoError(t, err)
	require.True(t, q.Release())

	moves := journal.all()
	require.Len(t, moves, 2)
	assert.Equal(t, MoveStartRefused, moves[0].Kind)
	assert.Equal(t, 10*time.Minute, moves[0].Elapsed)
	assert.Equal(t, MoveReleased, moves[1].Kind)
	assert.Equal(t, rec.Order, moves[1].Admission)
	f.isZero(t)
}

func TestRecordingRecordsStepTwelveResampleAndLoadRejection(t *testing.T) {
	f, _ := newRecordingFixture(t, nil)
	// A sample observed after the first reading: step 12 re-reads the
	// clock, and the record keeps both readings.
	f.clock.set(at(5))
	f.publish(t, 2, 6, 0.1, 0.1)
	later, _ := f.load.CurrentLoad()
	f.clock.set(at(5))
	clock := &steppingAfterFirst{fakeClock: f.clock, then: at(9)}
	ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: clock})
	var rec DecisionRecord
	p, err := ctl.AdmitRecorded(request("b-1"), &rec)
	require.NoError(t, err)
	defer p.Release()
	assert.Equal(t, 2, rec.Reads)
	assert.Equal(t, []time.Duration{4 * time.Millisecond, 4 * time.Millisecond}, rec.Since[:rec.Reads])
	assert.Same(t, later, rec.Load)

	// An overloaded node: step 12 decides; the sample is recorded, the
	// commit is not reached.
	f.publish(t, 3, 9, 0.99, 0.1)
	f.clock.set(at(9))
	var over DecisionRecord
	_, err = f.ctl.AdmitRecorded(request("b-2"), &over)
	require.Error(t, err)
	assert.False(t, over.Committed)
	require.NotNil(t, over.Load)
	assert.Equal(t, uint64(3), over.Load.Sequence)
	assert.Nil(t, over.CommitLoad)
	assert.NotZero(t, over.Order)
}

// steppingAfterFirst answers Now with the fake clock's time and every
// Since as if the clock had moved to then.
type steppingAfterFirst struct {
	*fakeClock
	then time.Time
}

func (c *steppingAfterFirst) Since(t time.Time) time.Duration { return c.then.Sub(t) }

func TestPlainProviderRecordsNoOrder(t *testing.T) {
	f := newFixture(t, nil)
	assert.Zero(t, f.provider.NextOrder())
	var rec DecisionRecord
	p, err := f.ctl.AdmitRecorded(request("c-1"), &rec)
	require.NoError(t, err)
	assert.Zero(t, rec.Order)
	assert.True(t, rec.Committed)
	assert.True(t, rec.First.Equal(epoch))
	require.True(t, p.Release())
	assert.Panics(t, func() { _, _ = f.ctl.AdmitRecorded(request("c-2"), nil) })
	_, err = NewRecordingProvider(&policy.NodeAdmissionPolicy{}, nil)
	assert.Error(t, err, "an invalid policy")
}

// TestRecordingOrdersConcurrentMovesOfAPermit: many goroutines admit,
// start and release at once at a small limit; every order is drawn once,
// and each permit's admission, start and release are in that order.
func TestRecordingOrdersConcurrentMovesOfAPermit(t *testing.T) {
	f, journal := newRecordingFixture(t, func(p *policy.NodeAdmissionPolicy) {
		p.Tenants[0].Limits.MaxLiveActivations = 3
	})
	const workers, each = 4, 200
	var mu sync.Mutex
	var orders []uint64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var rec DecisionRecord
				p, err := f.ctl.AdmitRecorded(request(fmt.Sprintf("w%d-%d", w, i)), &rec)
				mu.Lock()
				orders = append(orders, rec.Order)
				mu.Unlock()
				if err != nil {
					continue
				}
				if i%2 == 0 {
					e, err := p.StartExecution()
					if err == nil {
						e.Release()
					}
					continue
				}
				p.Release()
			}
		}()
	}
	wg.Wait()
	byPermit := map[uint64][]LedgerMove{}
	for _, m := range journal.all() {
		orders = append(orders, m.Order)
		byPermit[m.Admission] = append(byPermit[m.Admission], m)
	}
	sort.Slice(orders, func(i, j int) bool { return orders[i] < orders[j] })
	for i := 1; i < len(orders); i++ {
		require.NotEqual(t, orders[i-1], orders[i], "order %d drawn twice", orders[i])
	}
	require.NotZero(t, orders[0])
	for admission, moves := range byPermit {
		sort.Slice(moves, func(i, j int) bool { return moves[i].Order < moves[j].Order })
		prev := admission
		for _, m := range moves {
			assert.Greater(t, m.Order, prev)
			prev = m.Order
		}
		assert.Contains(t, []MoveKind{MoveReleased}, moves[len(moves)-1].Kind)
	}
	f.isZero(t)
}

// TestRecordingJournalsAReclaim: a permit dropped without a release is
// reclaimed by the collector, and the journal is told, with its order.
func TestRecordingJournalsAReclaim(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	var rec DecisionRecord
	func() {
		p, err := f.ctl.AdmitRecorded(request("dropped"), &rec)
		require.NoError(t, err)
		require.True(t, p.Live())
	}()
	require.True(t, collectUntil(400, func() bool { return f.provider.Metrics().Leaked == 1 }), "not reclaimed")
	require.Eventually(t, func() bool { return len(journal.all()) == 1 }, 10*time.Second, time.Millisecond)
	m := journal.all()[0]
	assert.Equal(t, MoveReclaimed, m.Kind)
	assert.Equal(t, rec.Order, m.Admission)
	assert.Greater(t, m.Order, rec.Order)
	f.isZero(t)
}

// TestRecordingOnTheSystemClockRecordsItsReading: a controller on the
// system clock derives no reading from its base for a recorded decision,
// so the record holds the reading the decision used.
func TestRecordingOnTheSystemClockRecordsItsReading(t *testing.T) {
	f, _ := newRecordingFixture(t, nil)
	load := NewNodeLoadState(time.Minute, nil)
	ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: load})
	require.NoError(t, load.Publish(LoadSample{Sequence: 9, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}))
	before := time.Now()
	var rec DecisionRecord
	p, err := ctl.AdmitRecorded(request("system"), &rec)
	after := time.Now()
	require.NoError(t, err)
	defer p.Release()
	require.False(t, rec.First.IsZero(), "no reading recorded")
	assert.False(t, rec.First.Before(before) || rec.First.After(after), "reading %v outside [%v, %v]", rec.First, before, after)
	assert.Equal(t, 1, rec.Reads)
}

// A recorded decision on a recording provider is never refused by the
// lock-free pre-check: its capacity answer comes from a transaction,
// whose order places it where it took effect. On a plain provider the
// pre-check answers it, as it answers any request.
func TestARecordedCapacityRefusalIsDecidedInATransaction(t *testing.T) {
	full := func(p *policy.NodeAdmissionPolicy) { p.Tenants[0].Limits.MaxLiveActivations = 1 }
	recording, _ := newRecordingFixture(t, full)
	plain := newFixture(t, full)
	for _, tc := range []struct {
		name      string
		f         *fixture
		committed bool
	}{{"recording", recording, true}, {"plain", plain, false}} {
		held, err := tc.f.ctl.AdmitAt(request("held"), at(0))
		require.NoError(t, err, tc.name)
		var rec DecisionRecord
		_, err = tc.f.ctl.AdmitRecorded(request("over"), &rec)
		wantError(t, err, CodeResourceExhausted, ScopeTenant, DimLiveActivations, ReasonCapacityExhausted, true)
		assert.Equal(t, tc.committed, rec.Committed, tc.name)
		assert.Equal(t, tc.committed, rec.Order != 0, tc.name)
		require.True(t, held.Release(), tc.name)
	}
}
