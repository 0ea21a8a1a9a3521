package core

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/core/deadline"
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
// Every bad publish fails closed until a valid newer sample arrives, and
// a rejected publish never becomes the baseline later samples are ordered
// against. A nil *NodeLoadState is a source with no sample.
//
// A NodeLoadState must not be copied after first use.
type NodeLoadState struct {
	noCopy noCopy

	maxAge time.Duration // the policy's maximum observation age
	clock  deadline.Clock

	current  atomic.Pointer[LoadSample] // nil: fail closed
	rejected atomic.Uint64              // publishes refused

	mu           sync.Mutex // serializes publishers
	lastSequence uint64     // guarded by mu; of the last accepted sample
	lastObserved time.Time  // guarded by mu
	accepted     bool       // guarded by mu; false: no baseline
}

// NewNodeLoadState returns a state with no sample: admission fails closed
// until the first valid publish. maximumObservationAge is the policy's
// (see [policy.OverloadPolicy]); a publish observed later than clock's
// reading by more than it is refused. A nil clock is the system clock. A
// maximum age that is not positive is a bug in the embedding program and
// panics.
func NewNodeLoadState(maximumObservationAge time.Duration, clock deadline.Clock) *NodeLoadState {
	if maximumObservationAge <= 0 {
		panic("core: NewNodeLoadState with a maximum observation age that is not positive")
	}
	if clock == nil {
		clock = deadline.System{}
	}
	return &NodeLoadState{maxAge: maximumObservationAge, clock: clock}
}

// Publish validates s and makes it current. A sample is rejected with
// [ErrLoadSampleRejected], and admission then fails closed until a valid
// later sample is published, when a pressure is not a number in [0, 1], a
// delay is negative, its sequence does not exceed the last accepted one,
// its observation time is before the last accepted one, or it was
// observed later than the clock's reading now by more than the maximum
// observation age (a sampler clock far ahead must not become a baseline
// that locks admission out until real time catches up). A rejected sample
// leaves the baseline as it was. A smaller lead, and a stale sample, are
// accepted here and judged when admitting, so a sample published slightly
// early becomes usable once its time has come.
func (l *NodeLoadState) Publish(s LoadSample) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.acceptableLocked(&s) {
		l.rejectLocked()
		return ErrLoadSampleRejected
	}
	l.accepted = true
	l.lastSequence = s.Sequence
	l.lastObserved = s.ObservedAt
	sample := s
	l.current.Store(&sample)
	return nil
}

func (l *NodeLoadState) acceptableLocked(s *LoadSample) bool {
	if !validPressure(s.CPUPressure) || !validPressure(s.MemoryPressure) {
		return false
	}
	for _, d := range s.QueueDelay {
		if d < 0 {
			return false
		}
	}
	if l.accepted && (s.Sequence <= l.lastSequence || s.ObservedAt.Before(l.lastObserved)) {
		return false
	}
	return s.ObservedAt.Sub(l.clock.Now()) <= l.maxAge
}

// rejectLocked withdraws the current sample and counts a refused publish.
func (l *NodeLoadState) rejectLocked() {
	l.current.Store(nil)
	l.rejected.Add(1)
}

// RejectedPublishes is the number of publishes refused so far.
func (l *NodeLoadState) RejectedPublishes() uint64 {
	if l == nil {
		return 0
	}
	return l.rejected.Load()
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
			l.rejectLocked()
			return ErrLoadSampleRejected
		}
		sample.QueueDelay[i] = time.Duration(ms) * time.Millisecond
	}
	return l.Publish(sample)
}

// Clear withdraws the current sample and forgets the baseline: admission
// fails closed until the next valid publish, which may begin again at any
// sequence (a restarted sampler starts at 1).
func (l *NodeLoadState) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.current.Store(nil)
	l.accepted = false
	l.lastSequence = 0
	l.lastObserved = time.Time{}
}

// CurrentLoad returns the current sample lock-free; a nil state has none.
func (l *NodeLoadState) CurrentLoad() (*LoadSample, bool) {
	if l == nil {
		return nil, false
	}
	s := l.current.Load()
	return s, s != nil
}

func validPressure(f float64) bool {
	return !math.IsNaN(f) && f >= 0 && f <= 1
}

// loadVerdict judges a sample of the given age at the first reading,
// elapsed after it, against the overload policy (ok: there is a sample,
// and s is not nil): missing, future-dated and stale samples are
// unavailable; then CPU, then memory pressure at or above its threshold
// is overload. Ages are durations from the first
// reading, so the caller need not build a second time.Time.
func loadVerdict(s *LoadSample, ok bool, age, elapsed time.Duration, o *policy.OverloadPolicy) *rejection {
	if !ok {
		return errLoadUnavailable
	}
	// The sample's age at first + elapsed is age + elapsed; elapsed is
	// never negative and the maximum age is positive, so neither side of
	// either comparison overflows.
	if age < -elapsed {
		return errLoadUnavailable // observed after now: future-dated
	}
	if age > o.MaximumObservationAge-elapsed {
		return errLoadUnavailable // stale
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
