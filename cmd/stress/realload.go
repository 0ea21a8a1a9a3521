package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/node/pipeline"
)

// The -load values.
const (
	loadSynthetic = "synthetic" // the soak's own sampler: calm, with overload flips and malformed samples
	loadPSI       = "psi"       // the node's real sampler over this machine's /proc and cgroup
)

// realLoad is the real sampler running for a soak: New, one synchronous
// sample so admission opens at once, then Run on its own goroutine.
type realLoad struct {
	sampler *loadsampler.Sampler
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// startRealLoad starts the real sampler publishing into s.load, through
// the pipeline's delay floors and with its scheduler's queue delays when
// pipe is not nil, and prints the sources it reads.
func (s *soak) startRealLoad(pipe *pipeline.Pipeline) (*realLoad, error) {
	cfg := loadsampler.Config{Target: s.load, MaximumObservationAge: s.provider.Policy().Node().Overload.MaximumObservationAge,
		Logger: slog.New(slog.NewTextHandler(s.out, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if pipe != nil {
		cfg.QueueDelay = pipe.QueueDelay
	}
	sampler, err := loadsampler.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("load sampler: %w", err)
	}
	if err := sampler.Sample(); err != nil {
		return nil, fmt.Errorf("load sampler: %w", err)
	}
	src := sampler.Sources()
	fmt.Fprintf(s.out, "load: the real sampler every %v, cpu from %s, memory from %s\n", sampler.Interval(), src.CPU, src.Memory)
	ctx, cancel := context.WithCancel(context.Background())
	r := &realLoad{sampler: sampler, cancel: cancel}
	r.done.Add(1)
	go func() { defer r.done.Done(); sampler.Run(ctx) }()
	return r, nil
}

// stop ends Run, waits for it and prints what it did.
func (r *realLoad) stop(s *soak) {
	r.cancel()
	r.done.Wait()
	st := r.sampler.Stats()
	cur, _ := s.load.CurrentLoad()
	src := r.sampler.Sources()
	line := fmt.Sprintf("load: %d samples published, %d failed reads, %d refused; sources cpu %s, memory %s", st.Published, st.Failures,
		st.Rejected, src.CPU, src.Memory)
	if cur != nil {
		line += fmt.Sprintf("; last cpu %.3f memory %.3f", cur.CPUPressure, cur.MemoryPressure)
	}
	fmt.Fprintln(s.out, line)
}
