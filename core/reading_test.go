package core

import (
	"math"
	"testing"
	"time"

	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// systemController is the fixture's provider and source behind the
// system clock, with a load state that reads it too.
func systemController(t *testing.T) (*fixture, *AdmissionController, *NodeLoadState) {
	f := newFixture(t, nil)
	// The state refuses at publish only samples older than an hour; the
	// fixture policy's maximum age at admission is two seconds.
	load := NewNodeLoadState(time.Hour, nil)
	ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: load})
	if !ctl.system {
		t.Fatal("a controller without a clock is not on the system clock")
	}
	return f, ctl, load
}

// TestSystemClockReadingIsTheAdmissionInstant: on the system clock the
// first reading of a request without a caller deadline is derived from
// the controller's base (firstReading), one with a caller deadline is
// time.Now. Either way the admission instant the permit's deadline is
// bound to carries a monotonic reading and lies, monotonically and in
// wall time, between readings taken just before and just after.
func TestSystemClockReadingIsTheAdmissionInstant(t *testing.T) {
	f, ctl, load := systemController(t)
	if err := load.Publish(LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	for _, caller := range []bool{false, true} {
		req := request("sys")
		if caller {
			req.Deadline = policy.Some(time.Now().Add(time.Hour).UnixMilli())
		}
		if got := ctl.derivedReading(req); got == caller {
			t.Fatalf("caller deadline %v: derived reading %v", caller, got)
		}
		before := time.Now()
		p, err := ctl.Admit(req)
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		g := p.Grant()
		admitted := g.Deadline.Add(-g.Budget.WallTime.Value)
		if !deadline.HasMonotonic(admitted) || admitted.Before(before) || admitted.After(after) {
			t.Fatalf("caller deadline %v: admitted at %v, not monotonically within [%v, %v]", caller, admitted, before, after)
		}
		const slack = 50 * time.Millisecond // no wall-clock step is expected while the test runs
		if w := admitted.Round(0); w.Before(before.Round(0).Add(-slack)) || w.After(after.Round(0).Add(slack)) {
			t.Fatalf("caller deadline %v: wall reading %v outside [%v, %v]", caller, w, before.Round(0), after.Round(0))
		}
		p.Release()
	}
	f.isZero(t)
}

// TestSystemClockJudgesWallOnlySamplesByTheWallClock: a load sample whose
// time carries no monotonic reading is judged against time.Now's wall
// reading: a fresh one admits, one older than the policy's maximum age
// (two seconds) is stale.
func TestSystemClockJudgesWallOnlySamplesByTheWallClock(t *testing.T) {
	_, ctl, load := systemController(t)
	if err := load.Publish(LoadSample{Sequence: 1, ObservedAt: time.Now().Round(0).Add(-3 * time.Second), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	_, err := ctl.Admit(request("stale"))
	wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	if err := load.Publish(LoadSample{Sequence: 2, ObservedAt: time.Now().Round(0), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	p, err := ctl.Admit(request("wall-only"))
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
}

// TestWallOnlySampleReplacesTheDerivedReading: checkLoad swaps a derived
// first reading for time.Now when the sample has no monotonic reading,
// and keeps it when the sample has one.
func TestWallOnlySampleReplacesTheDerivedReading(t *testing.T) {
	_, ctl, load := systemController(t)
	time.Sleep(5 * time.Millisecond)
	for _, wallOnly := range []bool{false, true} {
		observed := time.Now()
		if wallOnly {
			observed = observed.Round(0)
		}
		seq := uint64(1)
		if wallOnly {
			seq = 2
		}
		if err := load.Publish(LoadSample{Sequence: seq, ObservedAt: observed, CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
			t.Fatal(err)
		}
		d := decision{derived: true} // a derived reading at the base, from before the sample
		if err := ctl.checkLoad(&d); err != nil {
			t.Fatalf("wall only %v: %v", wallOnly, err)
		}
		if replaced := !d.derived; replaced != wallOnly {
			t.Fatalf("wall only %v: reading replaced %v", wallOnly, replaced)
		}
		if wallOnly && d.admittedAt.Before(observed) {
			t.Fatal("the replacement reading is older than the sample")
		}
	}
}

// TestDerivedSampleAge: with a derived reading, step 12 judges the
// sample's age from monotonic offsets to the controller's base, without
// building the reading; the age is the one the built reading would give,
// a sample far older than any maximum age stays stale instead of
// wrapping, and a sample observed just after the reading (published
// while the request ran) is judged against a fresh reading, not called
// future-dated.
func TestDerivedSampleAge(t *testing.T) {
	_, ctl, load := systemController(t)
	for _, tc := range []struct{ since, observed time.Duration }{
		{0, 0}, {time.Second, 0}, {time.Second, time.Second}, {time.Second, 2 * time.Second},
		{3 * time.Hour, -time.Hour}, {time.Millisecond, -time.Millisecond}, {time.Second, time.Nanosecond},
	} {
		s := &LoadSample{ObservedAt: ctl.base.Add(tc.observed)}
		d := decision{derived: true, sinceBase: tc.since}
		want := ctl.base.Add(tc.since).Sub(s.ObservedAt)
		if got := ctl.sampleAge(s, &d); got != want {
			t.Fatalf("%+v: age %v, want %v", tc, got, want)
		}
		built := decision{admittedAt: ctl.base.Add(tc.since)}
		if got := ctl.sampleAge(s, &built); got != want {
			t.Fatalf("%+v: age from the built reading %v, want %v", tc, got, want)
		}
	}
	// A monotonic reading lies within the wall clock's 1885 to 2157
	// range, so no real offset wraps; the guard is checked at the edge.
	old := &LoadSample{ObservedAt: ctl.base.Add(-100 * 365 * 24 * time.Hour)}
	if !deadline.HasMonotonic(old.ObservedAt) {
		t.Fatal("the old sample lost its monotonic reading")
	}
	if got := ctl.sampleAge(old, &decision{derived: true, sinceBase: math.MaxInt64 - time.Hour}); got != math.MaxInt64 {
		t.Fatalf("an old sample's age wrapped to %v", got)
	}

	d := decision{derived: true, sinceBase: time.Since(ctl.base)}
	time.Sleep(2 * time.Millisecond)
	if err := load.Publish(LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	if got := ctl.step12Since(&d); got < 2*time.Millisecond {
		t.Fatalf("%v since the first reading, want at least 2ms", got)
	}
	if err := ctl.checkLoad(&d); err != nil {
		t.Fatalf("a sample observed after the reading: %v", err)
	}
	if !d.derived {
		t.Fatal("the derived reading was replaced")
	}
	if got := ctl.step12Since(&decision{derived: true, sinceBase: time.Hour}); got != 0 {
		t.Fatalf("a reading ahead of now gives %v since it, want 0", got)
	}
}
