package loadsampler

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// Target is what samples are published into: the node's
// [core.NodeLoadState] (a test may record them instead).
type Target interface {
	Publish(core.LoadSample) error
}

// QueueDelayFunc reports the observed queue delay per cell class at now:
// the wait of the oldest activation queued for that class, 0 when none.
// scheduler.Scheduler.OldestWait is one; pipeline.Pipeline.QueueDelay,
// which also raises a degraded class to its pool's floor, is the node's.
type QueueDelayFunc func(now time.Time) [policy.NumCellClasses]time.Duration

// Config configures a [Sampler].
type Config struct {
	Files
	// Target receives every sample; required.
	Target Target
	// Interval is the time between samples. Zero is a quarter of
	// MaximumObservationAge, so that two samples can be lost before
	// admission fails closed.
	Interval time.Duration
	// MaximumObservationAge is the policy's
	// node.overload.maximum_observation_age_ms.
	MaximumObservationAge time.Duration
	// QueueDelay supplies per-class queue delays; nil reports none.
	QueueDelay QueueDelayFunc
	// Clock stamps each sample (ObservedAt) and measures the interval PSI
	// totals are differenced over; nil is the system clock. The ticker
	// runs on real time.
	Clock deadline.Clock
	// Logger receives one line per change of state; nil is slog.Default().
	Logger *slog.Logger
}

// Stats are a sampler's counters since New.
type Stats struct {
	Published uint64 // samples the target accepted
	Failures  uint64 // reads that failed; nothing was published
	Rejected  uint64 // samples the target refused
}

// Sampler reads node load and publishes it on its own ticker. The node
// owns it: create it with [New] and run [Sampler.Run] on a goroutine of
// the node's. Admission never starts one.
//
// Fields up to mu never change after New; mu serializes samples and
// guards the fields after it. The counters are atomics so that Stats
// never waits for a read in progress.
//
// A Sampler must not be copied after first use.
type Sampler struct {
	noCopy noCopy

	files      Files
	cgroup     cgroupDir
	cpus       int
	interval   time.Duration
	target     Target
	queueDelay QueueDelayFunc
	clock      deadline.Clock
	logger     *slog.Logger

	published atomic.Uint64
	failures  atomic.Uint64
	rejected  atomic.Uint64

	mu       sync.Mutex
	sequence uint64   // guarded by mu; of the last publish
	previous baseline // guarded by mu; the last successful read
	state    string   // guarded by mu; "" healthy, else the failure last logged
	sources  Sources  // guarded by mu; of the last successful read
}

// New checks cfg, finds the memory cgroup, and takes one reading to learn
// (and log) the sources it will use. That reading is not published, and
// a source that is present but unusable fails New with an error naming
// the file.
func New(cfg Config) (*Sampler, error) {
	if cfg.Target == nil || cfg.Interval < 0 || (cfg.Interval == 0 && cfg.MaximumObservationAge <= 0) {
		return nil, ErrInvalidConfig
	}
	s := &Sampler{files: cfg.Files, cpus: usableCPUsOr(cfg.CPUs), interval: cfg.Interval, target: cfg.Target,
		queueDelay: cfg.QueueDelay, clock: cfg.Clock, logger: cfg.Logger}
	if s.interval == 0 {
		s.interval = DefaultInterval(cfg.MaximumObservationAge)
	}
	if s.clock == nil {
		s.clock = deadline.System{}
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	var err error
	if s.cgroup, err = findCgroup(s.files); err != nil {
		return nil, err
	}
	r, err := readRaw(s.files, s.cgroup)
	if err != nil {
		return nil, err
	}
	first := compute(&r, &baseline{}, time.Time{}, s.cpus)
	s.sources = first.Sources
	s.logger.Info("load sampler sources", "cpu", first.Sources.CPU.String(), "memory_pressure", memoryInput(&r).String(),
		"cgroup", s.cgroup.String(), "usable_cpus", s.cpus, "interval", s.interval)
	return s, nil
}

// memoryInput is the pressure input memory is compared with the cgroup
// against.
func memoryInput(r *raw) MemorySource {
	if r.haveMem {
		return MemoryPSI
	}
	return MemoryMeminfo
}

// DefaultInterval is a quarter of the maximum observation age.
func DefaultInterval(maximumObservationAge time.Duration) time.Duration {
	return max(maximumObservationAge/4, time.Millisecond)
}

// Interval is the time between samples.
func (s *Sampler) Interval() time.Duration { return s.interval }

// Run samples at once and then every interval until ctx ends, and
// returns when it has. It starts nothing that outlives it.
func (s *Sampler) Run(ctx context.Context) {
	ticker := time.NewTicker(s.interval)
	defer ticker.Stop()
	for {
		_ = s.Sample()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// Sample reads the files once and publishes the result with the next
// sequence number. A failed read publishes nothing (the last sample goes
// stale and admission fails closed once it is older than the maximum
// observation age), is counted, and is logged only when the state
// changes; so is a sample the target refuses.
func (s *Sampler) Sample() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := readRaw(s.files, s.cgroup)
	now := s.clock.Now()
	if err != nil {
		s.failures.Add(1)
		s.changeStateLocked(err)
		return err
	}
	reading := compute(&r, &s.previous, now, s.cpus)
	s.previous = baseline{at: now, raw: r, ok: true}
	s.sources = reading.Sources
	sample := core.LoadSample{ObservedAt: now, CPUPressure: reading.CPU, MemoryPressure: reading.Memory}
	if s.queueDelay != nil {
		sample.QueueDelay = s.queueDelay(now)
	}
	s.sequence++
	sample.Sequence = s.sequence
	if err := s.target.Publish(sample); err != nil {
		s.rejected.Add(1)
		s.changeStateLocked(err)
		return err
	}
	s.published.Add(1)
	s.changeStateLocked(nil)
	return nil
}

// changeStateLocked logs a change between healthy and a failure, or
// between two different failures; a repeat of the same state is silent.
func (s *Sampler) changeStateLocked(err error) {
	state := ""
	if err != nil {
		state = err.Error()
	}
	if state == s.state {
		return
	}
	was := s.state
	s.state = state
	switch {
	case err != nil:
		s.logger.Warn("load sample failed; nothing published, admission fails closed once the last sample is stale",
			"err", state, "failures", s.failures.Load(), "rejected", s.rejected.Load())
	case was != "":
		s.logger.Info("load sampling recovered", "failures", s.failures.Load(), "rejected", s.rejected.Load())
	}
}

// Sources names where the last successful reading came from.
func (s *Sampler) Sources() Sources {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sources
}

// Stats copies the counters.
func (s *Sampler) Stats() Stats {
	return Stats{Published: s.published.Load(), Failures: s.failures.Load(), Rejected: s.rejected.Load()}
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
