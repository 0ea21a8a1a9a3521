package shadow

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/coretrace"
	"latent.dev/admission/internal/trace"
)

// vclock is the clock of the replay's controllers, which only a permit's
// start and release read (a decision reads its line's readings through
// coretrace.Replaying): Now is the move's time, and Since the recorded
// time from the admission to the move.
type vclock struct {
	now     time.Time
	elapsed time.Duration
}

func (c *vclock) set(now time.Time, elapsed time.Duration) { c.now, c.elapsed = now, elapsed }

// Now returns the move's time.
func (c *vclock) Now() time.Time { return c.now }

// Since returns the move's recorded elapsed time.
func (c *vclock) Since(time.Time) time.Duration { return c.elapsed }

// sample converts a recorded load line, once per sequence.
func (r *replay) sample(l *trace.Load) *core.LoadSample {
	if s, ok := r.conv[l.Sequence]; ok {
		return s
	}
	if len(r.conv) >= trace.KeptSamples {
		clear(r.conv)
	}
	s := coretrace.Sample(l, r.start)
	r.conv[l.Sequence] = s
	return s
}

// BySequence is the recorded sample seq; when the trace no longer holds
// it, the latest one handed out, and the replay is inexact
// (coretrace.Samples).
func (r *replay) BySequence(seq uint64) (*core.LoadSample, bool) {
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
	return r.Latest()
}

// Latest is the latest sample handed out in order (coretrace.Samples).
func (r *replay) Latest() (*core.LoadSample, bool) {
	if r.latest == nil {
		return nil, false
	}
	return r.sample(r.latest), true
}
