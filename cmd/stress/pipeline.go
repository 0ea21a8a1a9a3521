package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// pipelineBehaviors is what the synthetic backend does, by input name:
// every terminal outcome the runner knows.
var pipelineBehaviors = map[string]synthetic.Behavior{
	"success":   {},
	"slow":      {Duration: time.Millisecond},
	"declared":  {Exit: runner.ExitDeclaredError},
	"trap":      {Exit: runner.ExitTrapped},
	"fuel":      {Fuel: 1 << 62},
	"platform":  {Exit: runner.ExitPlatformFailure},
	"uncertain": {UncertainCleanup: true},
	"cancel":    {Block: true},
}

var pipelineInputs = func() []string {
	names := make([]string, 0, len(pipelineBehaviors))
	for name := range pipelineBehaviors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}()

// runPipeline soaks the full pipeline: admission, the fair scheduler, the
// fixed cell pool and the runner with a synthetic backend. At the end
// every ledger, scheduler and pool counter must be back at its baseline,
// no cell may have run two guests at once, and no permit may have leaked.
func runPipeline(cfg config, pol *policy.NodeAdmissionPolicy, file catalog.File, out io.Writer) int {
	s, err := newSoak(cfg, pol, file, out)
	if err != nil {
		fmt.Fprintf(out, "stress: %v\n", err)
		return 2
	}
	backend := synthetic.New(synthetic.ByInput(pipelineBehaviors))
	backends := map[string]runner.Backend{}
	for _, b := range pol.Node.Backends {
		backends[b] = backend
	}
	pipe, err := pipeline.New(s.provider, pipeline.Config{Backends: backends})
	if err != nil {
		fmt.Fprintf(out, "stress: %v\n", err)
		return 2
	}
	defer pipe.Close()
	if cfg.load == loadPSI {
		if s.real, err = s.startRealLoad(pipe); err != nil {
			fmt.Fprintf(out, "stress: %v\n", err)
			return 2
		}
	} else {
		s.publishThrough(pipe, 1)
	}
	base := pipe.Counters()
	before := sampleResources()

	var (
		tallyMu sync.Mutex
		tally   = map[string]int64{}
		calls   atomic.Int64
		wg      sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); s.pipelineSampler(pipe, stop) }()
	start := time.Now()
	latencies := make([]histogram, cfg.workers)
	var workers sync.WaitGroup
	for w := 0; w < cfg.workers; w++ {
		workers.Add(1)
		go func(w int) {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(cfg.seed, uint64(w)))
			local := map[string]int64{}
			for time.Since(start) < cfg.duration {
				kind, took := s.invokeOnce(pipe, rng, w)
				local[kind]++
				latencies[w].record(took)
				calls.Add(1)
			}
			tallyMu.Lock()
			for k, v := range local {
				tally[k] += v
			}
			tallyMu.Unlock()
		}(w)
	}
	s.progress(start)
	workers.Wait()
	close(stop)
	wg.Wait()
	if s.real != nil {
		s.real.stop(s)
	}
	pipe.Drain()
	pipe.ReplenishAll()
	elapsed := time.Since(start)

	var latency histogram
	for i := range latencies {
		latency.merge(&latencies[i])
	}
	diff := pipe.Counters().Diff(base)
	after := sampleResources()
	fmt.Fprintf(out, "\npipeline soak: %s with %d workers, seed %d: %d calls (%.0f/s)\n", elapsed.Round(time.Millisecond),
		cfg.workers, cfg.seed, calls.Load(), float64(calls.Load())/elapsed.Seconds())
	kinds := make([]string, 0, len(tally))
	for k := range tally {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(out, "  %-34s %d\n", k, tally[k])
	}
	fmt.Fprintf(out, "call latency (admit to outcome) p50 %v  p99 %v  p99.9 %v\n", latency.quantile(0.5), latency.quantile(0.99), latency.quantile(0.999))
	fmt.Fprintf(out, "goroutines %d -> %d\ninvariants:\n", before.goroutines, after.goroutines)
	checks := []check{
		{"ledger, scheduler and pool counters back at baseline", len(diff) == 0, strings.Join(diff, "; ")},
		{"no cell ran two guests or was reused after quarantine", backend.Violations() == 0, fmt.Sprintf("%d violations", backend.Violations())},
		{"no permit leaked", s.provider.Metrics().Leaked == 0, fmt.Sprintf("%d reclaimed by the GC", s.provider.Metrics().Leaked)},
		{"unexpected errors", tally["unexpected"] == 0, fmt.Sprintf("%d", tally["unexpected"])},
	}
	ok := true
	for _, c := range checks {
		status := "ok  "
		if !c.ok {
			status, ok = "FAIL", false
		}
		fmt.Fprintf(out, "  %s %s (%s)\n", status, c.name, c.detail)
	}
	if !ok {
		return 1
	}
	return 0
}

// invokeOnce sends one request through the pipeline and says how it ended.
func (s *soak) invokeOnce(pipe *pipeline.Pipeline, rng *rand.Rand, w int) (string, time.Duration) {
	t := &s.templates[rng.IntN(len(s.templates))]
	pin := (*s.pins.Load())[0]
	_, handle, err := pin.Resolve(t.target, strconv.FormatUint(rng.Uint64(), 36))
	if err != nil {
		return "unresolved", 0
	}
	req := &core.AdmissionRequest{
		ActivationID:    "p" + strconv.Itoa(w) + "-" + strconv.FormatUint(rng.Uint64(), 36),
		Principal:       t.principal,
		Handle:          handle, // as latentd's: the handle carries the revision
		RequestedBudget: policy.Budget{CPUFuel: 1 + rng.Uint64N(1_000_000_000), MemoryBytes: 1 + rng.Uint64N(32<<20)},
		PayloadBytes:    rng.Uint64N(t.payload + 1),
		Priority:        rng.Uint32N(t.priority + 1),
	}
	input := pipelineInputs[rng.IntN(len(pipelineInputs))]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if input == "cancel" {
		time.AfterFunc(time.Millisecond, cancel)
	}
	begin := time.Now()
	_, err = pipe.Invoke(ctx, s.base.WithPolicySource(pin), req, []byte(input))
	took := time.Since(begin)
	var ce core.Error
	if errors.As(err, &ce) {
		s.rejected.Add(1)
	} else {
		s.admitted.Add(1)
	}
	switch {
	case err == nil:
		return "ran", took
	case errors.As(err, &ce):
		// A rejected request backs off a little, as a client would.
		time.Sleep(100 * time.Microsecond)
		return "rejected " + string(ce.Reason()), took
	case errors.Is(err, context.Canceled):
		return "caller cancelled", took
	}
	for _, known := range []error{runner.ErrDeclared, runner.ErrTrapped, runner.ErrDeadlineExceeded, runner.ErrFuelExhausted,
		runner.ErrMemoryExhausted, runner.ErrCanceled, runner.ErrPlatformFailure} {
		if errors.Is(err, known) {
			return "ended: " + known.Error(), took
		}
	}
	if strings.HasPrefix(err.Error(), "scheduler:") {
		return "scheduler: " + err.Error(), took
	}
	return "unexpected", took
}

// publishThrough publishes a calm sample raised by the pool's delay floors.
func (s *soak) publishThrough(pipe *pipeline.Pipeline, seq uint64) {
	now := time.Now()
	_ = s.load.Publish(core.LoadSample{Sequence: seq, ObservedAt: now, CPUPressure: 0.2, MemoryPressure: 0.2, QueueDelay: pipe.QueueDelay(now)})
}

// pipelineSampler publishes every 5ms and repairs quarantined cells, so
// that lost capacity reaches admission as a conservative queue delay until
// the pool is whole again.
func (s *soak) pipelineSampler(pipe *pipeline.Pipeline, stop <-chan struct{}) {
	seq := uint64(1)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if s.real != nil {
			// The real sampler publishes; this loop only repairs.
			pipe.ReplenishAll()
			continue
		}
		seq++
		s.publishThrough(pipe, seq)
		if pipe.ReplenishAll() > 0 {
			seq++
			s.publishThrough(pipe, seq)
		}
	}
}
