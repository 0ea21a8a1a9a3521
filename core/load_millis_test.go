package core

import (
	"errors"
	"math"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// A queue delay published in whole milliseconds reaches the feasibility
// check as that many milliseconds, up to the largest a Duration holds.
func TestPublishMillisDelayReachesFeasibility(t *testing.T) {
	f := newFixture(t, nil)
	s := LoadSampleMillis{Sequence: 2, ObservedAtUnixMillis: at(0).UnixMilli(), CPUPressure: 0.1, MemoryPressure: 0.1}
	s.QueueDelayMillis[policy.Small] = 100 // required = 100 + minimum 20 + margin 10
	if err := f.load.PublishMillis(s); err != nil {
		t.Fatal(err)
	}
	req := request("a")
	req.RequestedBudget.WallTime = policy.Some(130 * time.Millisecond)
	_, err := f.ctl.AdmitAt(req, at(0))
	wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, true)
	req.RequestedBudget.WallTime = policy.Some(131 * time.Millisecond)
	p, err := f.ctl.AdmitAt(req, at(0))
	if err != nil {
		t.Fatal(err)
	}
	p.Release()

	s.Sequence = 3
	s.QueueDelayMillis[policy.Small] = math.MaxInt64 / int64(time.Millisecond)
	if err := f.load.PublishMillis(s); err != nil {
		t.Fatalf("the largest delay a Duration holds: %v", err)
	}
	_, err = f.ctl.AdmitAt(request("b"), at(0))
	wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false)

	s.Sequence = 4
	s.QueueDelayMillis[policy.Small]++
	if err := f.load.PublishMillis(s); !errors.Is(err, ErrLoadSampleRejected) {
		t.Fatalf("a delay one millisecond past what a Duration holds: %v", err)
	}
}
