package coretrace

import (
	"errors"
	"math"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// SetRequest puts what a decision line says of an admission request in
// d: its activation ID, priority, budget, payload size and deadline. The
// requested wall time and the deadline, when set, are kept in times and
// d points at them. (The line's target, routing key and principal are
// the edge's: the recorder sets them. The revision is not written: the
// replay resolves the target and routing key in the line's pin
// generation again, which is what the edge did.)
func SetRequest(d *trace.Decision, req *core.AdmissionRequest, times *[2]int64) {
	d.ActivationID, d.Priority, d.PayloadBytes = req.ActivationID, req.Priority, req.PayloadBytes
	b := &req.RequestedBudget
	d.Budget = trace.Budget{CPUFuel: b.CPUFuel, MemoryBytes: b.MemoryBytes}
	if b.WallTime.Set {
		times[0] = int64(b.WallTime.Value)
		d.Budget.WallTimeNS = &times[0]
	}
	d.DeadlineUnixMS = nil
	if req.Deadline.Set {
		times[1] = req.Deadline.Value
		d.DeadlineUnixMS = &times[1]
	}
	d.Revision = nil
}

// Request is SetRequest's reverse: the admission request of decision d,
// by principal p, for the revision rev (resolved again by the replay,
// with its handle).
func Request(req *core.AdmissionRequest, d *trace.Decision, p core.Principal, rev *policy.ResolvedRevision, handle core.RevisionHandle) {
	*req = core.AdmissionRequest{
		ActivationID:    d.ActivationID,
		Principal:       p,
		Revision:        *rev,
		Handle:          handle,
		RequestedBudget: policy.Budget{CPUFuel: d.Budget.CPUFuel, MemoryBytes: d.Budget.MemoryBytes},
		PayloadBytes:    d.PayloadBytes,
		Priority:        d.Priority,
	}
	if d.Budget.WallTimeNS != nil {
		req.RequestedBudget.WallTime = policy.Some(time.Duration(*d.Budget.WallTimeNS))
	}
	if d.DeadlineUnixMS != nil {
		req.Deadline = policy.Some(*d.DeadlineUnixMS)
	}
}

// Answer is err's reason, scope and dimension as a line records them, or
// trace.AnswerAdmitted when err is nil.
func Answer(err error) (answer, scope, dimension string) {
	if err == nil {
		return trace.AnswerAdmitted, "", ""
	}
	var ce core.Error
	if !errors.As(err, &ce) {
		return err.Error(), "", "" // never: admission returns core.Errors
	}
	return string(ce.Reason()), string(ce.Scope()), string(ce.Dimension())
}

// SetAnswer puts err's answer (Answer) in d.
func SetAnswer(d *trace.Decision, err error) {
	d.Answer, d.Scope, d.Dimension = Answer(err)
}

// LoadOf is a load line's sample s, its time as T since start.
func LoadOf(s *core.LoadSample, start time.Time) *trace.Load {
	q := make([]int64, len(s.QueueDelay))
	for i, d := range s.QueueDelay {
		q[i] = int64(d)
	}
	return &trace.Load{Sequence: s.Sequence, ObservedT: int64(s.ObservedAt.Sub(start)),
		CPUPressure: s.CPUPressure, MemoryPressure: s.MemoryPressure, QueueDelayNS: q}
}

// Sample is LoadOf's reverse, for a trace that started at startUnixNano;
// queue delays past the node's cell classes are ignored.
func Sample(l *trace.Load, startUnixNano int64) *core.LoadSample {
	s := &core.LoadSample{Sequence: l.Sequence, ObservedAt: At(startUnixNano, l.ObservedT),
		CPUPressure: l.CPUPressure, MemoryPressure: l.MemoryPressure}
	for i := 0; i < len(l.QueueDelayNS) && i < policy.NumCellClasses; i++ {
		s.QueueDelay[i] = time.Duration(l.QueueDelayNS[i])
	}
	return s
}

// At is the wall time of T t in a trace that started at startUnixNano,
// held at the int64 bounds instead of wrapping: a trace's times may be
// anything.
func At(startUnixNano, t int64) time.Time { return time.Unix(0, AddSaturating(startUnixNano, t)) }

// AddSaturating is a+b, held at the int64 bounds instead of wrapping.
func AddSaturating(a, b int64) int64 {
	c := a + b
	switch {
	case a > 0 && b > 0 && c < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && c >= 0:
		return math.MinInt64
	}
	return c
}

// MoveOf is ledger move m's line kind (a start or a release) and its
// move, by value: what [trace.Writer.AddMove] queues with m.Order.
func MoveOf(m core.LedgerMove) (kind string, mv trace.Move) {
	kind = trace.KindRelease
	if m.Started {
		kind = trace.KindStart
	}
	return kind, trace.Move{Of: m.Admission, ElapsedNS: int64(m.Elapsed), Refused: m.Refused, Reclaimed: m.Reclaimed}
}
