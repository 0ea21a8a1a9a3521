package core

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/policy"
)

// LoadSample is one trusted observation of node pressure.
type LoadSample struct {
	// Sequence orders publishes; each must exceed the last accepted one.
	Sequence uint64
	// ObservedAt is when the sampler measured; it must not precede the
	// last accepted observation.
	ObservedAt time.Time
	// CPUPressure and MemoryPressure are fractions in [0, 1].
	CPUPressure    float64
	MemoryPressure float64
	// QueueDelay is the observed queue delay per cell class (never
	// negative); a class without an observation has 0.
	QueueDelay [policy.NumCellClasses]time.Duration
}

// NodeLoadSource is what admission reads node load from. CurrentLoad
// returns the latest accepted sample, or false when none is usable (none
// was published, or the last publish was rejected). It must not block or
// allocate; the returned sample must never change.
type NodeLoadSource interface {
	CurrentLoad() (*LoadSample, bool)
}

// NodeLoadState is a value a trusted sampler publishes into and admission
// reads lock-free. It is not a monitoring worker: it starts nothing.
// Every bad publish fails closed until a valid newer sample arrives.
//
// A NodeLoadState must not be copied after first use.
type NodeLoadState struct {
	noCopy noCopy

	current atomic.Pointer[LoadSample] // nil: fail closed

	mu           sync.Mutex // serializes publishers
	lastSequence uint64     // guarded by mu; of the last accepted sample
	lastObserved time.Time  // guarded by mu
	accepted     bool       // guarded by mu
}

// NewNodeLoadState returns a state with no sample: admission fails closed
// until the first valid publish.
func NewNodeLoadState() *NodeLoadState { return &NodeLoadState{} }

// Publish validates s and makes it current. A sample with a pressure that
// is not a number in [0, 1], a negative delay, a sequence that does not
// exceed the last accepted one, or an observation time before the last
// accepted one is rejected with [ErrLoadSampleRejected], and admission then
// fails closed until a valid later sample is published. Future-dated and
// stale samples are accepted here and judged when admitting, so a sample
// published early becomes usable once its time has come.
func (l *NodeLoadState) Publish(s LoadSample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !validPressure(s.CPUPressure) || !validPressure(s.MemoryPressure) ||
		(l.accepted && (s.Sequence <= l.lastSequence || s.ObservedAt.Before(l.lastObserved))) {
		l.current.Store(nil)
		return errLoadRejected
	}
	for _, d := range s.QueueDelay {
		if d < 0 {
			l.current.Store(nil)
			return errLoadRejected
		}
	}
	l.accepted = true
	l.lastSequence = s.Sequence
	l.lastObserved = s.ObservedAt
	sample := s
	l.current.Store(&sample)
	return nil
}

// LoadSampleMillis is a sample as samplers often measure it: times and
// delays in whole milliseconds.
type LoadSampleMillis struct {
	Sequence             uint64
	ObservedAtUnixMillis int64
	CPUPressure          float64
	MemoryPressure       float64
	QueueDelayMillis     [policy.NumCellClasses]int64
}

// maxDelayMillis is the largest delay in milliseconds a time.Duration holds.
const maxDelayMillis = math.MaxInt64 / int64(time.Millisecond)

// PublishMillis converts s and publishes it. A delay that is negative or
// does not fit a time.Duration is rejected here, where it enters, and
// fails admission closed like every other rejected publish.
func (l *NodeLoadState) PublishMillis(s LoadSampleMillis) error {
	sample := LoadSample{Sequence: s.Sequence, ObservedAt: time.UnixMilli(s.ObservedAtUnixMillis),
		CPUPressure: s.CPUPressure, MemoryPressure: s.MemoryPressure}
	for i, ms := range s.QueueDelayMillis {
		if ms < 0 || ms > maxDelayMillis {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.current.Store(nil)
			return errLoadRejected
		}
		sample.QueueDelay[i] = time.Duration(ms) * time.Millisecond
	}
	return l.Publish(sample)
}

// Clear withdraws the current sample: admission fails closed until the
// next valid publish. Ordering against earlier samples is kept.
func (l *NodeLoadState) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current.Store(nil)
}

// CurrentLoad returns the current sample lock-free.
func (l *NodeLoadState) CurrentLoad() (*LoadSample, bool) {
	s := l.current.Load()
	return s, s != nil
}

func validPressure(f float64) bool {
	return !math.IsNaN(f) && f >= 0 && f <= 1
}

// loadVerdict judges a sample at now against the overload policy: missing,
// future-dated and stale samples are unavailable; then CPU, then memory
// pressure at or above its threshold is overload.
func loadVerdict(s *LoadSample, ok bool, now time.Time, o *policy.OverloadPolicy) *Error {
	if !ok || s == nil {
		return errLoadUnavailable
	}
	if s.ObservedAt.After(now) {
		return errLoadUnavailable
	}
	if now.Sub(s.ObservedAt) > o.MaximumObservationAge {
		return errLoadUnavailable
	}
	if s.CPUPressure >= o.CPUThreshold {
		return errCPUOverloaded
	}
	if s.MemoryPressure >= o.MemoryThreshold {
		return errMemoryOverloaded
	}
	return nil
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
