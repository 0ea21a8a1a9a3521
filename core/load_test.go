package core

import (
	"latent.dev/admission/core/atomicledger"
	"math"
	"sync/atomic"
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
	ctl := f.provider.Controller(ControllerConfig{Source: f.source})
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
		ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: steppingClock{first: at(1999), later: 2 * time.Millisecond}})
		_, err := ctl.Admit(request("x"))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	})
	t.Run("a caller deadline that passes under the lock", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: steppingClock{first: at(100), later: time.Millisecond}})
		req := request("x")
		req.Deadline = policy.Some(at(101).UnixMilli())
		_, err := ctl.Admit(req)
		wantError(t, err, CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false)
	})
	t.Run("the deadline is bound from the first reading", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: steppingClock{first: at(100), later: 40 * time.Millisecond}})
		p, err := ctl.Admit(request("x"))
		if err != nil {
			t.Fatal(err)
		}
		if !p.Grant().Deadline.Equal(at(5100)) {
			t.Fatalf("deadline %v", p.Grant().Deadline)
		}
		p.Release()
	})
	t.Run("feasibility uses the second reading", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: steppingClock{first: at(0), later: 2 * time.Millisecond}})
		req := request("x")
		req.RequestedBudget.WallTime = policy.Some(32 * time.Millisecond) // 30 left at the second reading
		_, err := ctl.Admit(req)
		wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false)
	})
	t.Run("a clock going backwards does not move time back", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: steppingClock{first: at(2001), later: -5 * time.Millisecond}})
		_, err := ctl.Admit(request("x"))
		wantError(t, err, CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	})
}

// countingClock counts reads; it is the fixture's clock otherwise.
type countingClock struct {
	fakeClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time {
	c.reads.Add(1)
	return c.fakeClock.Now()
}

func (c *countingClock) Since(t time.Time) time.Duration {
	c.reads.Add(1)
	return c.fakeClock.Since(t)
}

func TestClockReads(t *testing.T) {
	f := newFixture(t, nil)
	clock := &countingClock{fakeClock: fakeClock{now: epoch}}
	ctl := f.provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: clock})
	// The controller reads its clock once when it is built: its base,
	// which a permit's deadline is an offset from.
	if n := clock.reads.Swap(0); n != 1 {
		t.Fatalf("building the controller read the clock %d times", n)
	}
	t.Run("requests rejected by steps 1 to 10 read no clock", func(t *testing.T) {
		for _, edit := range []func(*AdmissionRequest){
			func(r *AdmissionRequest) { r.ActivationID = "" },
			func(r *AdmissionRequest) { r.Principal.Subject = "mallory" },
			func(r *AdmissionRequest) { r.Priority = 99 },
			func(r *AdmissionRequest) { r.Revision.Revision = "rev-forged" },
			func(r *AdmissionRequest) { r.RequestedBudget.MemoryBytes = 0 },
			func(r *AdmissionRequest) { r.PayloadBytes = 1 << 40 },
		} {
			req := request("x")
			edit(req)
			if _, err := ctl.Admit(req); err == nil {
				t.Fatal("admitted")
			}
		}
		if n := clock.reads.Load(); n != 0 {
			t.Fatalf("%d clock reads", n)
		}
	})
	t.Run("an admission reads once before and once under the mutex", func(t *testing.T) {
		clock.reads.Store(0)
		p, err := ctl.Admit(request("x"))
		if err != nil {
			t.Fatal(err)
		}
		if n := clock.reads.Load(); n != 2 {
			t.Fatalf("%d clock reads", n)
		}
		clock.reads.Store(0)
		e, err := p.StartExecution()
		if err != nil {
			t.Fatal(err)
		}
		if n := clock.reads.Load(); n != 1 {
			t.Fatalf("start read the clock %d times", n)
		}
		e.Release()
	})
}

// TestRejectionsNeverTakeTheMutex holds the ledger mutex while every
// lock-free rejection runs: any that needed it would block.
func TestRejectionsNeverTakeTheMutex(t *testing.T) {
	for _, tc := range decideCases() {
		if tc.want == accepted || tc.want.reason == ReasonQueueDeadlineInfeasible {
			continue // feasibility is decided under the mutex by design
		}
		t.Run(tc.name, func(t *testing.T) {
			f, req := tc.prepare(t, "locked")
			expectUnlocked(t, f, req, at(tc.atMs))
		})
	}
	t.Run("capacity through the pre-check", func(t *testing.T) {
		f := newFixture(t, nil)
		for i := 0; i < 6; i++ {
			admit(t, f, string(rune('a'+i)), 0)
		}
		expectUnlocked(t, f, request("full"), at(0))
	})
}

func expectUnlocked(t *testing.T, f *fixture, req *AdmissionRequest, now time.Time) {
	t.Helper()
	done := make(chan error, 1)
	waited, runs := false, 0
	f.provider.ledger.Update(func(tx atomicledger.Tx) {
		// A backlog read that reserves nothing sends the transaction to
		// the ledger's exact path, which holds its mutex and every
		// stripe: the rejection runs while that second run holds them.
		if runs++; runs == 1 {
			tx.CellBacklog(0)
			return
		}
		go func() {
			_, err := f.ctl.AdmitAt(req, now)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Error("admitted")
			}
		case <-time.After(time.Minute): // a loaded machine may be slow to run it
			waited = true
		}
	})
	if waited {
		<-done
		t.Fatal("the rejection waited for the ledger mutex")
	}
}
