package model

import (
	"math"
	"sync"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
)

// LoadState is the reference node load state: a trusted sampler publishes
// into it and controllers read the current sample from it. It satisfies
// core.NodeLoadSource. mu guards every field.
type LoadState struct {
	maxAge time.Duration
	clock  deadline.Clock

	mu       sync.Mutex
	current  *core.LoadSample // nil: fail closed
	accepted bool             // some sample was ever accepted
	lastSeq  uint64           // of the last accepted sample
	lastSeen time.Time        // of the last accepted sample
}

// NewLoadState returns a state with no sample that refuses publishes
// observed later than clock's reading by more than maxAge. A zero
// LoadState has no clock and does not judge the lead.
func NewLoadState(maxAge time.Duration, clock deadline.Clock) *LoadState {
	return &LoadState{maxAge: maxAge, clock: clock}
}

// Publish accepts s if both pressures are numbers in [0, 1], no queue
// delay is negative and, after the first accepted sample, the sequence
// exceeds the last accepted one and the observation time does not precede
// it, and it was not observed more than the maximum age after the clock's
// reading now. Anything else is rejected, the baseline stays as it was,
// and the state fails closed until a valid later sample arrives. Other
// ages are judged when admitting, not here.
func (l *LoadState) Publish(s core.LoadSample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	valid := pressureOK(s.CPUPressure) && pressureOK(s.MemoryPressure)
	for _, d := range s.QueueDelay {
		if d < 0 {
			valid = false
		}
	}
	if l.accepted && (s.Sequence <= l.lastSeq || s.ObservedAt.Before(l.lastSeen)) {
		valid = false
	}
	if l.clock != nil && s.ObservedAt.Sub(l.clock.Now()) > l.maxAge {
		valid = false
	}
	if !valid {
		l.current = nil
		return loadSampleRejected()
	}
	l.accepted, l.lastSeq, l.lastSeen = true, s.Sequence, s.ObservedAt
	sample := s
	l.current = &sample
	return nil
}

// PublishMillis converts a sample measured in whole milliseconds and
// publishes it. A delay that is negative or more milliseconds than a
// time.Duration holds is rejected, failing closed like any rejection.
func (l *LoadState) PublishMillis(s core.LoadSampleMillis) error {
	sample := core.LoadSample{Sequence: s.Sequence, ObservedAt: time.UnixMilli(s.ObservedAtUnixMillis),
		CPUPressure: s.CPUPressure, MemoryPressure: s.MemoryPressure}
	for i, ms := range s.QueueDelayMillis {
		if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.current = nil
			return loadSampleRejected()
		}
		sample.QueueDelay[i] = time.Duration(ms) * time.Millisecond
	}
	return l.Publish(sample)
}

// Clear withdraws the current sample and forgets the baseline.
func (l *LoadState) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current = nil
	l.accepted = false
}

// CurrentLoad returns the current sample, if any.
func (l *LoadState) CurrentLoad() (*core.LoadSample, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current, l.current != nil
}

func pressureOK(f float64) bool { return !math.IsNaN(f) && 0 <= f && f <= 1 }
