package core

import (
	"math"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

func TestLoadPublishFailsClosed(t *testing.T) {
	good := func(seq uint64, atMs int64) LoadSample {
		return LoadSample{Sequence: seq, ObservedAt: at(atMs), CPUPressure: 0.1, MemoryPressure: 0.1}
	}
	cases := []struct {
		name   string
		sample LoadSample
	}{
		{"CPU pressure is NaN", LoadSample{Sequence: 2, ObservedAt: at(10), CPUPressure: math.NaN()}},
		{"memory pressure above one", LoadSample{Sequence: 2, ObservedAt: at(10), MemoryPressure: 1.0001}},
		{"negative CPU pressure", LoadSample{Sequence: 2, ObservedAt: at(10), CPUPressure: -0.1}},
		{"infinite memory pressure", LoadSample{Sequence: 2, ObservedAt: at(10), MemoryPressure: math.Inf(1)}},
		{"negative queue delay", func() LoadSample {
			s := good(2, 10)
			s.QueueDelay[policy.Standard] = -time.Millisecond
			return s
		}()},
		{"sequence not greater than the last accepted", good(1, 10)},
		{"observation before the last accepted", good(2, -1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil) // accepted: seq 1 at 0
			err := f.load.Publish(tc.sample)
			wantError(t, err, CodeInvalidArgument, ScopeLoad, DimLoadSample, ReasonLoadSampleRejected, false)
			_, err = f.ctl.AdmitAt(request("x"), at(10))
			wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
			// A valid newer sample restores admission.
			if err := f.load.Publish(good(3, 10)); err != nil {
				t.Fatal(err)
			}
			p, err := f.ctl.AdmitAt(request("x"), at(10))
			if err != nil {
				t.Fatal(err)
			}
			p.Release()
		})
	}
}

func TestLoadBoundaries(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.load.Publish(LoadSample{Sequence: 2, ObservedAt: at(0), CPUPressure: 0, MemoryPressure: 1}); err != nil {
		t.Fatalf("pressures 0 and 1 are valid: %v", err)
	}
	if err := f.load.Publish(LoadSample{Sequence: 3, ObservedAt: at(0)}); err != nil {
		t.Fatalf("an equal observation time is not out of order: %v", err)
	}
}

func TestEarlySampleBecomesUsable(t *testing.T) {
	f := newFixture(t, nil)
	f.publish(t, 2, 500, 0.1, 0.1)
	_, err := f.ctl.AdmitAt(request("early"), at(400))
	wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	p, err := f.ctl.AdmitAt(request("early"), at(500))
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
}

func TestNoLoadSourceFailsClosed(t *testing.T) {
	f := newFixture(t, nil)
	ctl := f.provider.Controller(f.source, nil, nil)
	_, err := ctl.AdmitAt(request("x"), at(0))
	wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
}

// steppingClock returns first, then later readings from Since; it acts
// out lock contention between the two clock reads of the live path.
type steppingClock struct {
	first time.Time
	later time.Duration
}

func (c steppingClock) Now() time.Time                { return c.first }
func (c steppingClock) Since(time.Time) time.Duration { return c.later }

func TestLivePathDecidesWithTheSecondReading(t *testing.T) {
	t.Run("a load sample that goes stale under the lock", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(f.source, f.load, steppingClock{first: at(1999), later: 2 * time.Millisecond})
		_, err := ctl.AdmitNow(request("x"))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	})
	t.Run("a caller deadline that passes under the lock", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(f.source, f.load, steppingClock{first: at(100), later: time.Millisecond})
		req := request("x")
		req.Deadline = policy.Some(at(101).UnixMilli())
		_, err := ctl.AdmitNow(req)
		wantError(t, err, CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false)
	})
	t.Run("the deadline is bound from the first reading", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(f.source, f.load, steppingClock{first: at(100), later: 40 * time.Millisecond})
		p, err := ctl.AdmitNow(request("x"))
		if err != nil {
			t.Fatal(err)
		}
		if !p.Deadline().Equal(at(5100)) {
			t.Fatalf("deadline %v", p.Deadline())
		}
		p.Release()
	})
	t.Run("feasibility uses the second reading", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(f.source, f.load, steppingClock{first: at(0), later: 2 * time.Millisecond})
		req := request("x")
		req.RequestedBudget.WallTime = policy.Some(32 * time.Millisecond) // 30 left at the second reading
		_, err := ctl.AdmitNow(req)
		wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false)
	})
	t.Run("a clock going backwards does not move time back", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(f.source, f.load, steppingClock{first: at(2001), later: -5 * time.Millisecond})
		_, err := ctl.AdmitNow(request("x"))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	})
}
