package model

import (
	"math"
	"sync"
	"time"

	"latent.dev/admission/core"
)

// LoadState is the reference node load state: a trusted sampler publishes
// into it and controllers read the current sample from it. It satisfies
// core.NodeLoadSource. mu guards every field.
type LoadState struct {
	mu       sync.Mutex
	current  *core.LoadSample // nil: fail closed
	accepted bool             // some sample was ever accepted
	lastSeq  uint64           // of the last accepted sample
	lastSeen time.Time        // of the last accepted sample
}

// Publish accepts s if both pressures are numbers in [0, 1], no queue
// delay is negative and, after the first accepted sample, the sequence
// exceeds the last accepted one and the observation time does not precede
// it. Anything else is rejected, and the state fails closed until a valid
// later sample arrives. Age is judged when admitting, not here.
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

// Clear withdraws the current sample; ordering against earlier samples is
// kept.
func (l *LoadState) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current = nil
}

// CurrentLoad returns the current sample, if any.
func (l *LoadState) CurrentLoad() (*core.LoadSample, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.current, l.current != nil
}

func pressureOK(f float64) bool { return !math.IsNaN(f) && 0 <= f && f <= 1 }
