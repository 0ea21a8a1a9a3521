package core

import (
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
		p, err := ctl.AdmitNow(req)
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
	_, err := ctl.AdmitNow(request("stale"))
	wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	if err := load.Publish(LoadSample{Sequence: 2, ObservedAt: time.Now().Round(0), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	p, err := ctl.AdmitNow(request("wall-only"))
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
		d := decision{admittedAt: ctl.base} // a derived reading from before the sample
		if err := ctl.checkLoad(request("x"), &d); err != nil {
			t.Fatalf("wall only %v: %v", wallOnly, err)
		}
		if replaced := d.admittedAt != ctl.base; replaced != wallOnly {
			t.Fatalf("wall only %v: reading replaced %v", wallOnly, replaced)
		}
		if wallOnly && d.admittedAt.Before(observed) {
			t.Fatal("the replacement reading is older than the sample")
		}
	}
}
