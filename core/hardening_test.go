package core

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

// TestEffectiveBudgetIsShortenedByTheCallerDeadline checks both sides of
// the effective-budget boundary: a caller deadline earlier than now plus
// the granted wall time shortens the wall time the permit reports, one at
// or after it does not.
func TestEffectiveBudgetIsShortenedByTheCallerDeadline(t *testing.T) {
	const grantMs = 5000 // the resize revision's deployment ceiling
	for _, tc := range []struct {
		name       string
		deadlineMs int64 // after the admission time; 0: none
		wantMs     int64
	}{
		{"no caller deadline keeps the grant", 0, grantMs},
		{"a caller deadline after the grant keeps it", grantMs + 1, grantMs},
		{"a caller deadline at the grant keeps it", grantMs, grantMs},
		{"a caller deadline one millisecond earlier shortens it", grantMs - 1, grantMs - 1},
		{"a caller deadline well before the grant shortens it", 3000, 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			req := request("budget")
			if tc.deadlineMs != 0 {
				req.Deadline = policy.Some(at(100 + tc.deadlineMs).UnixMilli())
			}
			p, err := f.ctl.AdmitAt(req, at(100))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Release()
			want := policy.Some(time.Duration(tc.wantMs) * time.Millisecond)
			if got := p.Grant().Budget.WallTime; got != want {
				t.Fatalf("admission permit wall time %v, want %v", got.Value, want.Value)
			}
			if got := p.Grant().Deadline.Sub(at(100)); got != want.Value {
				t.Fatalf("deadline leaves %v, want %v", got, want.Value)
			}
			e, err := p.StartExecutionAt(at(100))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Release()
			if got := e.Grant().Budget.WallTime; got != want {
				t.Fatalf("execution permit wall time %v, want %v", got.Value, want.Value)
			}
		})
	}
}

// TestOverwrittenPermitIsInertAndStillReclaimed overwrites live permits
// with their zero value (which go vet allows), lets the collector find
// them, and checks that nothing crashes and that the reservations come
// back as leaked.
func TestOverwrittenPermitIsInertAndStillReclaimed(t *testing.T) {
	f := newFixture(t, nil)
	func() {
		p := admit(t, f, "zeroed", 0)
		*p = AdmissionPermit{}
		if p.Live() || p.Release() || p.Grant().ActivationID != "" {
			t.Fatal("an overwritten permit is not inert")
		}
		wantError(t, p.EnsureSchedulableAt(at(1)), CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
		_, err := p.StartExecution()
		wantError(t, err, CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)

		q := admit(t, f, "zeroed-exec", 0)
		e, err := q.StartExecutionAt(at(1))
		if err != nil {
			t.Fatal(err)
		}
		*e = ExecutionPermit{}
		if e.Live() || e.Release() {
			t.Fatal("an overwritten execution permit is not inert")
		}
	}()
	if s := f.provider.NodeSnapshot(); s.Live != 2 {
		t.Fatalf("overwriting released a reservation by itself: %+v", s)
	}
	for i := 0; i < 50 && f.provider.Metrics().Leaked < 2; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := f.provider.Metrics().Leaked; got != 2 {
		t.Fatalf("leaked %d, want 2", got)
	}
	f.isZero(t)
}

// TestCopiedPermitIsInert checks that a copy (which go vet rejects, but
// compiles) neither releases nor starts the original's reservation.
func TestCopiedPermitIsInert(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "copied", 0)
	defer p.Release()
	c := new(AdmissionPermit)
	copyPermit(c, p)
	if c.Live() || c.Release() || c.Grant().ActivationID != "" {
		t.Fatal("a copy acts on the original's reservation")
	}
	if !p.Live() {
		t.Fatal("the original is no longer live")
	}
}

// copyPermit copies through reflection, which go vet does not see.
func copyPermit(dst, src *AdmissionPermit) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// TestErrorsCannotBeChangedByACaller checks that the shared error values
// have no exported field, and that changing a caller's copy changes
// nothing another caller sees.
func TestErrorsCannotBeChangedByACaller(t *testing.T) {
	ty := reflect.TypeOf(Error{})
	for i := 0; i < ty.NumField(); i++ {
		if ty.Field(i).IsExported() {
			t.Fatalf("core.Error exports field %s", ty.Field(i).Name)
		}
	}
	before := make([]string, 0, len(AllErrors()))
	for _, e := range AllErrors() {
		before = append(before, fmt.Sprint(e.Code(), e.Scope(), e.Dimension(), e.Reason(), e.Retryable(), e.Error()))
	}
	f := newFixture(t, nil)
	_, err := f.ctl.AdmitAt(request(""), at(0))
	var got Error
	if !errors.As(err, &got) {
		t.Fatalf("errors.As does not find a core.Error in %v", err)
	}
	got = Error{} // all a caller can do to its copy
	_ = got
	all := AllErrors()
	all[0] = Error{}
	for i, e := range AllErrors() {
		if now := fmt.Sprint(e.Code(), e.Scope(), e.Dimension(), e.Reason(), e.Retryable(), e.Error()); now != before[i] {
			t.Fatalf("error %d changed: %q -> %q", i, before[i], now)
		}
	}
	_, again := f.ctl.AdmitAt(request(""), at(0))
	wantError(t, again, CodeInvalidArgument, ScopeRequest, DimActivationID, ReasonIdentifierInvalid, false)
	r := Reasons()
	r[0] = "changed"
	if Reasons()[0] != ReasonMetadataTooLarge {
		t.Fatal("Reasons can be modified by a caller")
	}
	var zero Error
	if zero.Code() != "" || zero.Retryable() || zero.Error() == "" {
		t.Fatalf("the zero Error answers %q %v %q", zero.Code(), zero.Retryable(), zero.Error())
	}
}

func TestExportedErrorsMatchTheirRows(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason Reason
	}{
		{ErrLoadSampleRejected, ReasonLoadSampleRejected},
		{ErrPermitDeadlineExceeded, ReasonDeadlineExceeded},
		{ErrPermitNotLive, ReasonPermitNotLive},
		{ErrRevisionNotAvailable, ReasonRevisionNotAvailable},
	} {
		var e Error
		if !errors.As(tc.err, &e) || e.Reason() != tc.reason {
			t.Errorf("%v: reason %q, want %q", tc.err, e.Reason(), tc.reason)
		}
	}
	f := newFixture(t, nil)
	p := admit(t, f, "is", 0)
	p.Release()
	if err := p.EnsureSchedulableAt(at(0)); !errors.Is(err, ErrPermitNotLive) {
		t.Fatalf("errors.Is(%v, ErrPermitNotLive) is false", err)
	}
}

// TestLoadPublishRecovery covers the load-sample rules that keep one bad
// publish from locking admission out.
func TestLoadPublishRecovery(t *testing.T) {
	const maxAgeMs = 2000 // the fixture policy's maximum observation age
	t.Run("a sample observed more than the maximum age ahead is rejected at publish", func(t *testing.T) {
		f := newFixture(t, nil)
		err := f.load.Publish(LoadSample{Sequence: 2, ObservedAt: at(maxAgeMs + 1)})
		wantError(t, err, CodeInvalidArgument, ScopeLoad, DimLoadSample, ReasonLoadSampleRejected, false)
		_, err = f.ctl.AdmitAt(request("a"), at(0))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		// It did not become the baseline: the next valid sample, with an
		// older observation time and a smaller sequence, restores admission.
		f.publish(t, 2, 0, 0.1, 0.1)
		p, err := f.ctl.AdmitAt(request("a"), at(0))
		if err != nil {
			t.Fatalf("admission did not recover: %v", err)
		}
		p.Release()
		if got := f.load.RejectedPublishes(); got != 1 {
			t.Fatalf("rejected publishes %d, want 1", got)
		}
	})
	t.Run("a lead of exactly the maximum age is accepted and judged when admitting", func(t *testing.T) {
		f := newFixture(t, nil)
		f.publish(t, 2, maxAgeMs, 0.1, 0.1)
		_, err := f.ctl.AdmitAt(request("a"), at(0))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		p, err := f.ctl.AdmitAt(request("a"), at(maxAgeMs))
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	t.Run("the lead is measured against the clock at publish", func(t *testing.T) {
		f := newFixture(t, nil)
		f.clock.set(at(10_000))
		f.publish(t, 2, 10_000+maxAgeMs, 0.1, 0.1)
	})
	t.Run("an hour-ahead sample does not make later samples out of order", func(t *testing.T) {
		f := newFixture(t, nil)
		if err := f.load.Publish(LoadSample{Sequence: 2, ObservedAt: at(3_600_000)}); err == nil {
			t.Fatal("an hour-ahead sample was accepted")
		}
		f.publish(t, 3, 100, 0.1, 0.1)
	})
	t.Run("a rejected out-of-order sample leaves the baseline", func(t *testing.T) {
		f := newFixture(t, nil)
		f.publish(t, 5, 100, 0.1, 0.1)
		if err := f.load.Publish(LoadSample{Sequence: 4, ObservedAt: at(200)}); err == nil {
			t.Fatal("a smaller sequence was accepted")
		}
		if err := f.load.Publish(LoadSample{Sequence: 5, ObservedAt: at(200)}); err == nil {
			t.Fatal("the baseline moved to the rejected sample")
		}
		f.publish(t, 6, 100, 0.1, 0.1)
	})
	t.Run("clearing forgets the baseline", func(t *testing.T) {
		f := newFixture(t, nil)
		f.publish(t, math.MaxUint64, 100, 0.1, 0.1)
		if err := f.load.Publish(LoadSample{Sequence: 1, ObservedAt: at(200)}); err == nil {
			t.Fatal("a sequence after the largest was accepted")
		}
		f.load.Clear()
		_, err := f.ctl.AdmitAt(request("a"), at(100))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		f.publish(t, 1, 50, 0.1, 0.1) // a restarted sampler, earlier observation included
		p, err := f.ctl.AdmitAt(request("a"), at(100))
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	t.Run("a rejected millisecond delay is counted", func(t *testing.T) {
		f := newFixture(t, nil)
		err := f.load.PublishMillis(LoadSampleMillis{Sequence: 2, QueueDelayMillis: [policy.NumCellClasses]int64{-1}})
		wantError(t, err, CodeInvalidArgument, ScopeLoad, DimLoadSample, ReasonLoadSampleRejected, false)
		if got := f.load.RejectedPublishes(); got != 1 {
			t.Fatalf("rejected publishes %d, want 1", got)
		}
	})
}

// notASample is a load source of another type whose methods fault on a
// nil receiver.
type notASample struct{ s LoadSample }

func (n *notASample) CurrentLoad() (*LoadSample, bool) { return &n.s, true }

// nilSample is a load source that breaks its contract: it reports a
// sample and hands back nil.
type nilSample struct{}

func (nilSample) CurrentLoad() (*LoadSample, bool) { return nil, true }

type nilPolicySource struct {
	m map[string]*policy.RevisionPolicy
}

func (n *nilPolicySource) RevisionPolicy(*policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	p, ok := n.m["x"]
	return p, ok
}

func TestTypedNilSourcesFailClosed(t *testing.T) {
	f := newFixture(t, nil)
	var state *NodeLoadState
	var other *notASample
	var source *nilPolicySource
	for name, ctl := range map[string]*AdmissionController{
		"typed-nil *NodeLoadState":   f.provider.Controller(ControllerConfig{Source: f.source, Load: state, Clock: f.clock}),
		"typed-nil other source":     f.provider.Controller(ControllerConfig{Source: f.source, Load: other, Clock: f.clock}),
		"a nil sample reported":      f.provider.Controller(ControllerConfig{Source: f.source, Load: nilSample{}, Clock: f.clock}),
		"a nil sample, system clock": f.provider.Controller(ControllerConfig{Source: f.source, Load: nilSample{}}),
	} {
		_, err := ctl.AdmitAt(request("a"), at(0))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		_, err = ctl.Admit(request("a"))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		_ = name
	}
	if _, ok := state.CurrentLoad(); ok || state.RejectedPublishes() != 0 {
		t.Fatal("a nil *NodeLoadState has a sample")
	}
	for _, ctl := range []*AdmissionController{
		f.provider.Controller(ControllerConfig{Source: source, Load: f.load, Clock: f.clock}),
		f.ctl.WithPolicySource(source),
	} {
		_, err := ctl.AdmitAt(request("a"), at(0))
		wantError(t, err, CodeAdmissionRejected, ScopeRevision, DimRevision, ReasonRevisionNotAvailable, false)
	}
}

func TestNewNodeLoadStateRefusesANonPositiveAge(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic")
		}
	}()
	NewNodeLoadState(0, nil)
}

// panickyLoad is a load source that panics from its second reading on:
// the first is step 12's, the second the commit's, inside the ledger's
// transaction.
type panickyLoad struct {
	inner NodeLoadSource
	calls atomic.Int32
}

func (p *panickyLoad) CurrentLoad() (*LoadSample, bool) {
	if p.calls.Add(1) >= 2 {
		panic("load source fault")
	}
	return p.inner.CurrentLoad()
}

// panickyClock is a clock whose Since panics while armed.
type panickyClock struct {
	*fakeClock
	armed atomic.Bool
}

func (c *panickyClock) Since(t time.Time) time.Duration {
	if c.armed.Load() {
		panic("clock fault")
	}
	return c.fakeClock.Since(t)
}

// TestAFaultInsideATransactionReleasesTheLedger: an embedder's load
// source or clock that panics while admission holds the ledger's mutex
// (the commit's load reading, StartExecution's clock reading) propagates
// its panic and leaves the mutex free, so the node goes on deciding.
func TestAFaultInsideATransactionReleasesTheLedger(t *testing.T) {
	f := newFixture(t, nil)
	mustPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Fatalf("%s did not panic", what)
			}
		}()
		fn()
	}
	load := &panickyLoad{inner: f.load}
	faulty := f.provider.Controller(ControllerConfig{Source: f.source, Load: load, Clock: f.clock})
	mustPanic("the commit's load reading", func() { _, _ = faulty.AdmitAt(request("a"), at(0)) })
	if load.calls.Load() != 2 {
		t.Fatalf("the load source was read %d times, want 2 (step 12, then the commit)", load.calls.Load())
	}
	p, err := f.ctl.AdmitAt(request("b"), at(0))
	if err != nil {
		t.Fatalf("after a fault in the commit: %v", err)
	}

	clock := &panickyClock{fakeClock: f.clock}
	ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: clock})
	q, err := ctl.AdmitAt(request("c"), at(0))
	if err != nil {
		t.Fatal(err)
	}
	clock.armed.Store(true)
	mustPanic("StartExecution's clock reading", func() { _, _ = q.StartExecution() })
	clock.armed.Store(false)
	if !p.Release() {
		t.Fatal("after a fault in StartExecution, a release returned nothing")
	}
	q.Release()
}

// sleepyLoad is a load source whose first reading (step 12's) returns
// after a pause: the time passes after the first clock reading and before
// the commit's.
type sleepyLoad struct {
	inner *NodeLoadState
	pause time.Duration
	calls atomic.Int32
}

func (s *sleepyLoad) CurrentLoad() (*LoadSample, bool) {
	sample, ok := s.inner.CurrentLoad()
	if s.calls.Add(1) == 1 {
		time.Sleep(s.pause)
	}
	return sample, ok
}

// TestTheCommitMeasuresFromADerivedFirstReading: on the system clock, a
// request without a caller deadline has its first reading derived from
// the controller's base, and the commit judges the time since that
// reading, not since the base: an hour-old base changes nothing, and
// time that passes between step 12 and the commit counts against the
// sample's age.
func TestTheCommitMeasuresFromADerivedFirstReading(t *testing.T) {
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		pause  time.Duration
		admit  bool
	}{
		{"an hour-old base", 30 * time.Second, 0, true},
		{"a pause between step 12 and the commit", 100 * time.Millisecond, 300 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Overload.MaximumObservationAge = tc.maxAge })
			state := NewNodeLoadState(tc.maxAge, nil)
			require.NoError(t, state.Publish(LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.2, MemoryPressure: 0.2}))
			ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: &sleepyLoad{inner: state, pause: tc.pause}})
			ctl.base = ctl.base.Add(-time.Hour)
			p, err := ctl.Admit(request("derived"))
			if tc.admit {
				require.NoError(t, err)
				p.Release()
				return
			}
			wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
		})
	}
}
