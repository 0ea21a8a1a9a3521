package pipeline

import (
	"context"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// Config configures a pipeline.
type Config struct {
	// Backends by revision backend name; required.
	Backends map[string]runner.Backend
	// Clock is the admission controller's clock; nil is the system clock.
	// The scheduler and runner judge the permit's deadline on it.
	Clock deadline.Clock
	// Scheduler tunes the scheduler; its Clock, if nil, is Clock.
	Scheduler scheduler.Options
}

// Pipeline is the smallest real downstream of admission on one node: a
// fixed cell pool sized from the policy, a fair scheduler over it and a
// runner. It owns goroutines (the dispatcher, a worker per cell at most)
// and must be ended with Drain or Close.
type Pipeline struct {
	provider  *core.LocalQuotaProvider
	pool      *cellpool.FixedCellPool
	scheduler *scheduler.Scheduler
	runner    *runner.Runner
}

// New builds the pool from provider's policy, so that pool and admission
// agree on every class's parallelism, and starts the scheduler.
func New(provider *core.LocalQuotaProvider, cfg Config) (*Pipeline, error) {
	r, err := runner.New(runner.Config{Backends: cfg.Backends, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(provider.Policy()))
	if err != nil {
		return nil, err
	}
	opts := cfg.Scheduler
	if opts.Clock == nil {
		opts.Clock = cfg.Clock
	}
	s, err := scheduler.New(provider.Policy(), pool, opts)
	if err != nil {
		return nil, err
	}
	return &Pipeline{provider: provider, pool: pool, scheduler: s, runner: r}, nil
}

// Submit hands an admitted permit and its input to the scheduler, which
// owns the permit from here in every case (on error it has been
// released). ctx governs the activation: cancelling it drops a queued
// activation and interrupts a running one. Wait on the returned
// activation for the outcome; stopping the wait early does not release
// the reservation.
func (p *Pipeline) Submit(ctx context.Context, permit *core.AdmissionPermit, input []byte) (*runner.Activation, error) {
	a := p.runner.NewActivation(input)
	if err := p.scheduler.Submit(ctx, permit, a); err != nil {
		return nil, err
	}
	return a, nil
}

// Invoke is the whole path for one request: admit with controller (live
// clock), submit, and wait under ctx. If ctx ends first, the activation is
// cancelled and Invoke returns at once, while the activation's goroutine
// keeps the reservation until the guest has stopped.
func (p *Pipeline) Invoke(ctx context.Context, controller *core.AdmissionController, req *core.AdmissionRequest, input []byte) (runner.Report, error) {
	permit, err := controller.Admit(req)
	if err != nil {
		return runner.Report{}, err
	}
	a, err := p.Submit(ctx, permit, input)
	if err != nil {
		return runner.Report{}, err
	}
	return a.Wait(ctx)
}

// QueueDelay is the sampler's queue-delay input (a
// loadsampler.QueueDelayFunc): per cell class, the wait of the oldest
// activation queued for it, raised to the pool's floor for the class
// ([cellpool.FixedCellPool.QueueDelayFloor]), so that admission of a class
// whose pool lost cells plans with the cells that remain, or stops. Load
// flows one way: the scheduler and the pool are read here, the sampler
// publishes into core.
func (p *Pipeline) QueueDelay(now time.Time) [policy.NumCellClasses]time.Duration {
	out := p.scheduler.OldestWait(now)
	for class := range policy.NumCellClasses {
		out[class] = max(out[class], p.pool.QueueDelayFloor(policy.CellClass(class)))
	}
	return out
}

// Drain stops accepting, runs everything queued, waits for every
// activation to finish, and closes the pool.
func (p *Pipeline) Drain() {
	p.scheduler.Drain()
	p.pool.Close()
}

// Close stops accepting, drops everything queued (their permits are
// released), waits for running activations and closes the pool.
func (p *Pipeline) Close() {
	p.scheduler.Close()
	p.pool.Close()
}

// Pool is the pipeline's cell pool.
func (p *Pipeline) Pool() *cellpool.FixedCellPool { return p.pool }

// Scheduler is the pipeline's scheduler.
func (p *Pipeline) Scheduler() *scheduler.Scheduler { return p.scheduler }

// Runner is the pipeline's runner.
func (p *Pipeline) Runner() *runner.Runner { return p.runner }

// Provider is the provider whose ledger the pipeline's permits hold.
func (p *Pipeline) Provider() *core.LocalQuotaProvider { return p.provider }

// ReplenishAll replaces every quarantined cell with a fresh one and
// reports how many it replaced: the repair step that brings pool and
// configuration back into agreement.
func (p *Pipeline) ReplenishAll() int {
	n := 0
	for class := range policy.NumCellClasses {
		for {
			if _, err := p.pool.Replenish(policy.CellClass(class)); err != nil {
				break
			}
			n++
		}
	}
	return n
}
