package coretrace

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// A request written into a line and read back is the request, but for
// what a trace never holds (claims, attributes, the later-phase budget
// dimensions) and what the replay resolves again (the principal, the
// revision and its handle).
func TestARequestRoundTrips(t *testing.T) {
	rev := policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: "acme", Service: "thumbs", Route: "resize",
		Contract: "c", Function: "f", Revision: "r1", Release: "rel1"}}
	for _, req := range []core.AdmissionRequest{
		{ActivationID: "a-1", Revision: rev, Priority: 3, PayloadBytes: 17,
			RequestedBudget: policy.Budget{CPUFuel: 5, MemoryBytes: 6, WallTime: policy.Some(7 * time.Millisecond)},
			Deadline:        policy.Some(int64(1_700_000_000_123))},
		{ActivationID: "a-2", Revision: rev, RequestedBudget: policy.Budget{CPUFuel: 1, MemoryBytes: 2}},
	} {
		var d trace.Decision
		d.Revision = &trace.Revision{Tenant: "left", Service: "over"}
		SetRequest(&d, &req, new([2]int64))
		assert.Nil(t, d.Revision, "a decision line does not repeat the revision its target resolves to")
		var back core.AdmissionRequest
		Request(&back, &d, req.Principal, &rev, nil)
		assert.Equal(t, req, back)
	}
}

func TestAnAnswerIsItsReasonScopeAndDimension(t *testing.T) {
	var d trace.Decision
	SetAnswer(&d, nil)
	assert.Equal(t, trace.Decision{Answer: trace.AnswerAdmitted}, d)
	for _, e := range core.AllErrors() {
		SetAnswer(&d, e)
		assert.Equal(t, trace.Decision{Answer: string(e.Reason()), Scope: string(e.Scope()), Dimension: string(e.Dimension())}, d)
	}
	a, s, dim := Answer(errors.New("not admission's"))
	assert.Equal(t, [3]string{"not admission's", "", ""}, [3]string{a, s, dim})
}

func TestALoadSampleRoundTrips(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	s := core.LoadSample{Sequence: 4, ObservedAt: start.Add(-time.Second), CPUPressure: 0.5, MemoryPressure: 0.25}
	for i := range s.QueueDelay {
		s.QueueDelay[i] = time.Duration(i+1) * time.Millisecond
	}
	l := LoadOf(&s, start)
	assert.Equal(t, int64(-time.Second), l.ObservedT)
	assert.Len(t, l.QueueDelayNS, policy.NumCellClasses)
	back := Sample(l, start.UnixNano())
	assert.True(t, back.ObservedAt.Equal(s.ObservedAt))
	back.ObservedAt = s.ObservedAt
	assert.Equal(t, s, *back)
	// More queue delays than the node's cell classes are ignored.
	l.QueueDelayNS = append(l.QueueDelayNS, 99)
	assert.Equal(t, s.QueueDelay, Sample(l, start.UnixNano()).QueueDelay)
}

func TestATimeOfAHostileTraceSaturates(t *testing.T) {
	assert.Equal(t, time.Unix(0, math.MaxInt64), At(math.MaxInt64-5, 1<<62))
	assert.Equal(t, time.Unix(0, math.MinInt64), At(math.MinInt64, -1))
	assert.Equal(t, time.Unix(0, 3), At(1, 2))
}

func TestAMoveIsAStartOrARelease(t *testing.T) {
	for _, tc := range []struct {
		m    core.LedgerMove
		kind string
	}{
		{core.LedgerMove{Order: 9, Admission: 3, Elapsed: time.Millisecond, Started: true}, trace.KindStart},
		{core.LedgerMove{Order: 9, Admission: 3, Elapsed: time.Millisecond, Started: true, Refused: true}, trace.KindStart},
		{core.LedgerMove{Order: 9, Admission: 3, Elapsed: time.Millisecond}, trace.KindRelease},
		{core.LedgerMove{Order: 9, Admission: 3, Elapsed: time.Millisecond, Reclaimed: true}, trace.KindRelease},
	} {
		kind, mv := MoveOf(tc.m)
		assert.Equal(t, tc.kind, kind)
		assert.Equal(t, trace.Move{Of: 3, ElapsedNS: int64(time.Millisecond), Refused: tc.m.Refused, Reclaimed: tc.m.Reclaimed}, mv)
	}
}
