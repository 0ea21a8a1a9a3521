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
	"latent.dev/admission/core/deadline"
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

// record is a recorder's Inputs in core's tests: it reads a clock and a
// load source and keeps each reading by its label, and counts the
// readings of each label.
type record struct {
	clk deadline.Clock
	src NodeLoadSource

	first             time.Time
	step12, commit    time.Duration
	load, commitLoad  *LoadSample
	fleet             FleetReading
	fleetRead         bool
	order             uint64
	committed, placed bool
	// reads counts every reading, by label: first, step12Since,
	// commitSince, step12Load, commitLoad, commitFleet.
	reads [6]int
}

// newRecord is a record reading ctl's own clock and load source.
func newRecord(ctl *AdmissionController) *record {
	return &record{clk: ctl.clock, src: ctl.load}
}

func (r *record) First() time.Time {
	r.reads[0]++
	r.first = r.clk.Now()
	return r.first
}

func (r *record) Step12Since(first time.Time) time.Duration {
	r.reads[1]++
	r.step12 = r.clk.Since(first)
	return r.step12
}

func (r *record) CommitSince(first time.Time) time.Duration {
	r.reads[2]++
	r.commit = r.clk.Since(first)
	return r.commit
}

func (r *record) current() (*LoadSample, bool) {
	if r.src == nil {
		return nil, false
	}
	return r.src.CurrentLoad()
}

func (r *record) Step12Load() (*LoadSample, bool) {
	r.reads[3]++
	s, ok := r.current()
	if ok {
		r.load = s
	}
	return s, ok
}

func (r *record) CommitLoad() (*LoadSample, bool) {
	r.reads[4]++
	s, ok := r.current()
	if ok {
		r.commitLoad = s
	}
	return s, ok
}

func (r *record) CommitFleet(f FleetReading) {
	r.reads[5]++
	r.fleet, r.fleetRead = f, true
}

func (r *record) Placed(order uint64, committed bool) {
	if r.placed {
		panic("placed twice")
	}
	r.order, r.committed, r.placed = order, committed, true
}

// clockReads is how many times the decision read the clock after its
// first reading.
func (r *record) clockReads() int { return r.reads[1] + r.reads[2] }

// admitRecorded is AdmitWith a new record of ctl's clock and load.
func admitRecorded(ctl *AdmissionController, req *AdmissionRequest) (*AdmissionPermit, *record, error) {
	rec := newRecord(ctl)
	p, err := ctl.AdmitWith(req, rec)
	return p, rec, err
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
	p, rec, err := admitRecorded(f.ctl, request("a-1"))
	require.NoError(t, err)
	assert.True(t, rec.first.Equal(at(7)), "first reading %v", rec.first)
	assert.True(t, rec.committed)
	assert.NotZero(t, rec.order)
	assert.Equal(t, [6]int{1, 0, 1, 1, 1, 0}, rec.reads, "each label read once; no step-12 resample")
	assert.Equal(t, time.Duration(0), rec.commit)
	assert.Same(t, sample, rec.load)
	assert.Same(t, sample, rec.commitLoad)

	// A duplicate is decided at the commit, after the admission.
	_, dup, err := admitRecorded(f.ctl, request("a-1"))
	wantError(t, err, CodeAlreadyExists, ScopeRequest, DimActivationID, ReasonActivationIDUnavailable, false)
	assert.True(t, dup.committed)
	assert.Greater(t, dup.order, rec.order)

	// A rejection before the clock: no reading, no commit, an order all
	// the same (it is placed among the ledger's transactions).
	bad := request("a-2")
	bad.Principal.Subject = "mallory"
	_, denied, err := admitRecorded(f.ctl, bad)
	require.Error(t, err)
	assert.True(t, denied.first.IsZero())
	assert.False(t, denied.committed)
	assert.Nil(t, denied.load)
	assert.Greater(t, denied.order, dup.order)

	// Start and release are journaled with their own orders, after the
	// admission, with the time since the admission's reading.
	f.clock.set(at(10))
	e, err := p.StartExecution()
	require.NoError(t, err)
	f.clock.set(at(25))
	require.True(t, e.Release())
	moves := journal.all()
	require.Len(t, moves, 2)
	assert.Equal(t, LedgerMove{Started: true, Order: moves[0].Order, Admission: rec.order, Elapsed: 3 * time.Millisecond}, moves[0])
	assert.Equal(t, LedgerMove{Order: moves[1].Order, Admission: rec.order, Elapsed: 18 * time.Millisecond}, moves[1])
	assert.Greater(t, moves[0].Order, denied.order)
	assert.Greater(t, moves[1].Order, moves[0].Order)
	assert.False(t, e.Release(), "a second release")
	assert.Len(t, journal.all(), 2, "a second release moves nothing and is not journaled")
	f.isZero(t)
}

func TestRecordingJournalsARefusedStartAndAQueuedRelease(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	p, late, err := admitRecorded(f.ctl, request("late"))
	require.NoError(t, err)
	f.clock.set(at(10 * 60 * 1000)) // far past any deadline
	_, err = p.StartExecution()
	require.ErrorIs(t, err, ErrPermitDeadlineExceeded)

	f.publish(t, 2, 10*60*1000, 0.5, 0.5)
	q, rec, err := admitRecorded(f.ctl, request("queued"))
	require.NoError(t, err)
	require.True(t, q.Release())

	moves := journal.all()
	require.Len(t, moves, 2)
	assert.True(t, moves[0].Started && moves[0].Refused && !moves[0].Reclaimed)
	assert.Equal(t, late.order, moves[0].Admission)
	assert.Equal(t, 10*time.Minute, moves[0].Elapsed)
	assert.False(t, moves[1].Started || moves[1].Refused || moves[1].Reclaimed)
	assert.Equal(t, rec.order, moves[1].Admission)
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
	p, rec, err := admitRecorded(ctl, request("b-1"))
	require.NoError(t, err)
	defer p.Release()
	assert.Equal(t, 2, rec.clockReads())
	assert.Equal(t, []time.Duration{4 * time.Millisecond, 4 * time.Millisecond}, []time.Duration{rec.step12, rec.commit})
	assert.Same(t, later, rec.load)

	// An overloaded node: step 12 decides; the sample is recorded, the
	// commit is not reached.
	f.publish(t, 3, 9, 0.99, 0.1)
	f.clock.set(at(9))
	_, over, err := admitRecorded(f.ctl, request("b-2"))
	require.Error(t, err)
	assert.False(t, over.committed)
	require.NotNil(t, over.load)
	assert.Equal(t, uint64(3), over.load.Sequence)
	assert.Nil(t, over.commitLoad)
	assert.NotZero(t, over.order)
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
	p, rec, err := admitRecorded(f.ctl, request("c-1"))
	require.NoError(t, err)
	assert.Zero(t, rec.order)
	assert.True(t, rec.committed)
	assert.True(t, rec.first.Equal(epoch))
	require.True(t, p.Release())
	p, err = f.ctl.AdmitWith(request("c-2"), nil)
	require.NoError(t, err, "a nil Inputs is Admit")
	require.True(t, p.Release())
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
				p, rec, err := admitRecorded(f.ctl, request(fmt.Sprintf("w%d-%d", w, i)))
				mu.Lock()
				orders = append(orders, rec.order)
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
		last := moves[len(moves)-1]
		assert.False(t, last.Started || last.Reclaimed, "the last move is a release")
	}
	f.isZero(t)
}

// TestRecordingJournalsAReclaim: a permit dropped without a release is
// reclaimed by the collector, and the journal is told, with its order.
func TestRecordingJournalsAReclaim(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	var rec *record
	func() {
		p, r, err := admitRecorded(f.ctl, request("dropped"))
		rec = r
		require.NoError(t, err)
		require.True(t, p.Live())
	}()
	require.True(t, collectUntil(400, func() bool { return f.provider.Metrics().Leaked == 1 }), "not reclaimed")
	require.Eventually(t, func() bool { return len(journal.all()) == 1 }, 10*time.Second, time.Millisecond)
	m := journal.all()[0]
	assert.True(t, m.Reclaimed && !m.Started)
	assert.Equal(t, rec.order, m.Admission)
	assert.Greater(t, m.Order, rec.order)
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
	p, rec, err := admitRecorded(ctl, request("system"))
	after := time.Now()
	require.NoError(t, err)
	defer p.Release()
	require.False(t, rec.first.IsZero(), "no reading recorded")
	assert.False(t, rec.first.Before(before) || rec.first.After(after), "reading %v outside [%v, %v]", rec.first, before, after)
	assert.Equal(t, 1, rec.clockReads())
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
		_, rec, err := admitRecorded(tc.f.ctl, request("over"))
		wantError(t, err, CodeResourceExhausted, ScopeTenant, DimLiveActivations, ReasonCapacityExhausted, true)
		assert.Equal(t, tc.committed, rec.committed, tc.name)
		assert.Equal(t, tc.committed, rec.order != 0, tc.name)
		require.True(t, held.Release(), tc.name)
	}
}

// TestAClockThatWentBackNeverMovesAPermitBack: a start and a release
// whose clock reads before the admission's reading see no time elapsed,
// never a negative time: the start goes ahead (the deadline cannot pass
// backwards) and the journal is told 0.
func TestAClockThatWentBackNeverMovesAPermitBack(t *testing.T) {
	f, journal := newRecordingFixture(t, nil)
	f.clock.set(at(7))
	p, err := f.ctl.Admit(request("back-1"))
	require.NoError(t, err)
	f.clock.set(at(5))
	e, err := p.StartExecution()
	require.NoError(t, err, "a start whose clock went back")
	f.clock.set(at(4))
	require.True(t, e.Release())
	moves := journal.all()
	require.Len(t, moves, 2)
	assert.True(t, moves[0].Started)
	assert.Equal(t, time.Duration(0), moves[0].Elapsed, "the start's elapsed time")
	assert.Equal(t, time.Duration(0), moves[1].Elapsed, "the release's elapsed time")
}
