package shadow

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// vclock is the replay's clock: Now is the decision's recorded time, and
// Since hands out the decision's recorded readings in order, then the
// last again (0 when there were none).
type vclock struct {
	now   time.Time
	since []int64
	next  int
	last  int64
}

func (c *vclock) set(now time.Time, since []int64) {
	c.now, c.since, c.next, c.last = now, since, 0, 0
}

// Now returns the decision's time.
func (c *vclock) Now() time.Time { return c.now }

// Since returns the next recorded reading.
func (c *vclock) Since(time.Time) time.Duration {
	if c.next < len(c.since) {
		c.last = c.since[c.next]
		c.next++
	}
	return time.Duration(c.last)
}

// vload is the replay's load source: the first call of a decision
// answers the sample step 12 judged, every later call the one the commit
// judged.
type vload struct {
	calls             int
	first, second     *core.LoadSample
	firstOK, secondOK bool
}

// CurrentLoad returns the recorded sample of this call.
func (l *vload) CurrentLoad() (*core.LoadSample, bool) {
	l.calls++
	if l.calls == 1 {
		return l.first, l.firstOK
	}
	return l.second, l.secondOK
}

// sample converts a recorded load line, once per sequence.
func (r *replay) sample(l *trace.Load) *core.LoadSample {
	if s, ok := r.conv[l.Sequence]; ok {
		return s
	}
	if len(r.conv) >= trace.KeptSamples {
		clear(r.conv)
	}
	s := &core.LoadSample{Sequence: l.Sequence, ObservedAt: r.at(l.ObservedT),
		CPUPressure: l.CPUPressure, MemoryPressure: l.MemoryPressure}
	for i := 0; i < len(l.QueueDelayNS) && i < policy.NumCellClasses; i++ {
		s.QueueDelay[i] = time.Duration(l.QueueDelayNS[i])
	}
	r.conv[l.Sequence] = s
	return s
}

// sampleBySeq is the recorded sample seq; when the trace no longer holds
// it, the latest one handed out, and the replay is inexact.
func (r *replay) sampleBySeq(seq uint64) (*core.LoadSample, bool) {
	if seq == 0 {
		return nil, false
	}
	if s, ok := r.conv[seq]; ok {
		return s, true
	}
	if l, ok := r.rd.Sample(seq); ok {
		return r.sample(&l), true
	}
	r.missingSamples++
	if r.latest != nil {
		return r.sample(r.latest), true
	}
	return nil, false
}

// prepareLoad sets what the load source answers for decision d.
func (r *replay) prepareLoad(d *trace.Decision) {
	v := r.load
	v.calls = 0
	switch {
	case d.Clock:
		v.first, v.firstOK = r.sampleBySeq(d.LoadSequence)
	case r.latest != nil:
		v.first, v.firstOK = r.sample(r.latest), true
	default:
		v.first, v.firstOK = nil, false
	}
	v.second, v.secondOK = v.first, v.firstOK
	if d.Committed {
		v.second, v.secondOK = r.sampleBySeq(d.CommitLoadSequence)
	}
}
