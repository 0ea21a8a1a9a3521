package runner

import (
	"context"
	"maps"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/policy"
)

// Guest is what a backend is asked to run: the admitted identity, the
// obligations it must enforce inside the guest (threading, state model,
// features, call depth), the cell, the input, and the grant the backend
// meters the guest against.
type Guest struct {
	ActivationID string
	Revision     policy.RevisionIdentity
	Obligations  core.Obligations
	Cell         cellpool.CellID
	Input        []byte
	// Budget is the permit's effective budget, never a fresh allowance:
	// the backend charges the guest's CPU fuel and memory against
	// Budget.CPUFuel and Budget.MemoryBytes as it consumes them, refuses
	// a charge past either, and reports both in its Exit.
	Budget policy.Budget
	// Deadline is the permit's, bound at admission and never reset; the
	// run's context ends at it.
	Deadline time.Time
}

// Backend executes guests on cells.
type Backend interface {
	// Run executes g on g.Cell and returns only once the guest has
	// stopped: no guest thread may still touch the cell. It meters the
	// guest against g.Budget, stops it when ctx ends (deadline or
	// cancellation) or a charge is refused, and then reports
	// ExitInterrupted; the Exit carries what the guest consumed, and
	// whether the backend can vouch for the cell's state after it.
	Run(ctx context.Context, g *Guest) Exit
}

// Config configures a runner.
type Config struct {
	// Backends by the name a revision's policy gives (Obligations.Backend).
	Backends map[string]Backend
	// Clock measures wall time and judges the deadline; nil is the system
	// clock (time.Now, read directly). It must be the admission
	// controller's clock, because the deadline was bound on it.
	Clock deadline.Clock
}

// Runner executes started activations: it enforces the permit's
// obligations and budget, meters the execution, finalizes accounting and
// disposes of the cell. It is immutable after New and safe for
// concurrent use; it starts no goroutine of its own.
type Runner struct {
	backends map[string]Backend
	clock    deadline.Clock
	// released and quarantined count finished activations by outcome, one
	// array per disposition of the cell: each activation is counted once,
	// in exactly one cell of the two, so every count only grows.
	released    [numOutcomes]*xsync.Counter
	quarantined [numOutcomes]*xsync.Counter
}

// New builds a runner.
func New(cfg Config) (*Runner, error) {
	if len(cfg.Backends) == 0 {
		return nil, ErrNoBackend
	}
	r := &Runner{backends: maps.Clone(cfg.Backends), clock: cfg.Clock}
	for i := range numOutcomes {
		r.released[i] = xsync.NewCounter()
		r.quarantined[i] = xsync.NewCounter()
	}
	return r, nil
}

// NewActivation wraps input as a job for the scheduler; submit it once.
func (r *Runner) NewActivation(input []byte) *Activation {
	return &Activation{runner: r, input: input, done: make(chan struct{})}
}

// Stats are the runner's counters since New.
type Stats struct {
	Outcomes    map[Outcome]int64 // only outcomes seen at least once
	Released    int64             // cells released after execution
	Quarantined int64             // cells quarantined after execution
}

// Stats copies the counters.
func (r *Runner) Stats() Stats {
	s := Stats{Outcomes: map[Outcome]int64{}}
	for i := range numOutcomes {
		released, quarantined := r.released[i].Value(), r.quarantined[i].Value()
		s.Released += released
		s.Quarantined += quarantined
		if v := released + quarantined; v != 0 {
			s.Outcomes[i] = v
		}
	}
	return s
}

// Count is the number of activations since New that ended with outcome o
// and left their cell in disposition d: Released (the backend reset it)
// or Quarantined (it could not vouch for it). Every executed activation
// is counted under exactly one pair, and each count only grows, so a
// scraper may read the pairs one by one without a lock. It allocates
// nothing; any other pair is zero.
func (r *Runner) Count(o Outcome, d Disposition) int64 {
	if o >= numOutcomes {
		return 0
	}
	switch d {
	case Released:
		return r.released[o].Value()
	case Quarantined:
		return r.quarantined[o].Value()
	}
	return 0
}

// execute runs one activation of grant g to its terminal outcome and
// disposes of the cell; the caller releases the execution permit
// afterwards. The order is the point: the guest stops, accounting is
// finalized, the cell is released or quarantined, and only then may the
// reservation go.
func (r *Runner) execute(ctx context.Context, g *core.Grant, lease *cellpool.Lease, input []byte) Report {
	o := &g.Obligations
	rep := Report{Cell: lease.Cell()}
	backend := r.backends[o.Backend]
	if backend == nil || rep.Cell.Class != o.CellClass {
		// Running on another backend or cell class than the one admitted
		// would break the grant; the guest never started, so the cell is
		// as clean as it was.
		rep.Outcome = PlatformFailure
		r.dispose(lease, true, &rep)
		return rep
	}
	guest := &Guest{ActivationID: g.ActivationID, Revision: g.Revision, Obligations: *o, Cell: rep.Cell,
		Input: input, Budget: g.Budget, Deadline: g.Deadline}
	start := r.now()
	exit, stopped := runGuest(ctx, backend, guest)
	end := r.now()
	metered(&exit, &g.Budget)
	rep.Consumed = Consumption{CPUFuel: exit.Fuel, PeakMemoryBytes: exit.PeakMemory, WallTime: max(end.Sub(start), 0)}
	rep.Outcome = PlatformFailure
	if stopped {
		rep.Outcome = classify(&exit, g.Deadline, ctx.Err() != nil, end)
	}
	if rep.Outcome == Succeeded || rep.Outcome == DeclaredError {
		rep.Output = exit.Output
	}
	// A backend that panicked may have left anything behind; nothing it
	// said about the cell can be trusted.
	r.dispose(lease, stopped && !exit.CellUncertain, &rep)
	return rep
}

// now is the runner's clock: Config.Clock, or time.Now when it is nil.
func (r *Runner) now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock.Now()
}

// metered holds exit's consumption to the grant, as a meter would: fuel
// past the grant is capped there and counts as a refused charge, and so
// does a peak memory past it. A backend that keeps to its contract never
// reports either.
func metered(exit *Exit, b *policy.Budget) {
	if exit.Fuel > b.CPUFuel {
		exit.Fuel, exit.FuelExhausted = b.CPUFuel, true
	}
	if exit.PeakMemory > b.MemoryBytes {
		exit.PeakMemory, exit.MemoryExhausted = b.MemoryBytes, true
	}
}

func (r *Runner) dispose(lease *cellpool.Lease, clean bool, rep *Report) {
	if clean {
		lease.Release()
		rep.Disposition = Released
		r.released[rep.Outcome].Inc()
	} else {
		lease.Quarantine()
		rep.Disposition = Quarantined
		r.quarantined[rep.Outcome].Inc()
	}
}

// runGuest calls the backend, turning a panic into a platform failure:
// stopped is false when the backend did not return normally, so nothing
// it says about the guest or the cell can be trusted.
func runGuest(ctx context.Context, b Backend, g *Guest) (exit Exit, stopped bool) {
	defer func() {
		if recover() != nil {
			stopped = false
		}
	}()
	return b.Run(ctx, g), true
}

// classify turns a backend's exit into the terminal outcome, judged
// against its refused charges and the permit's deadline at the moment
// the guest stopped. A result that arrives at or after the deadline is a
// deadline outcome whatever the guest said: the grant had run out.
func classify(exit *Exit, deadline time.Time, canceled bool, stopped time.Time) Outcome {
	late := !stopped.Before(deadline)
	fuelOut, memoryOut := exit.FuelExhausted, exit.MemoryExhausted
	switch exit.Kind {
	case ExitReturned, ExitDeclaredError, ExitTrapped:
		switch {
		case fuelOut:
			// The backend ignored a refused charge; the guest overran.
			return FuelExhausted
		case late:
			return DeadlineExceeded
		case exit.Kind == ExitReturned:
			return Succeeded
		case exit.Kind == ExitDeclaredError:
			return DeclaredError
		}
		return Trapped
	case ExitInterrupted:
		switch {
		case fuelOut:
			return FuelExhausted
		case late:
			return DeadlineExceeded
		case memoryOut:
			return MemoryExhausted
		case canceled:
			return Canceled
		}
	}
	return PlatformFailure
}

// Activation is one activation's job and its caller's handle: the
// scheduler runs it (Run) at most once and ends it (End) once, and the
// caller waits on it. The caller may stop waiting at any time; that
// never releases the reservation, which the goroutine running the
// activation holds until the guest has stopped.
//
// An Activation must not be copied after first use.
type Activation struct {
	noCopy noCopy

	runner *Runner
	input  []byte
	done   chan struct{}

	ran, ended atomic.Bool
	// report and err are written once, before done is closed.
	report Report
	err    error
}

// Run executes the activation; it is the scheduler's Job.Run. When it
// returns, the guest has stopped, accounting is final and the cell has
// been released or quarantined. grant is the permit's; the execution
// permit is the scheduler's to release.
func (a *Activation) Run(ctx context.Context, grant *core.Grant, lease *cellpool.Lease) {
	if !a.ran.CompareAndSwap(false, true) {
		panic("runner: activation run twice")
	}
	a.report = a.runner.execute(ctx, grant, lease, a.input)
}

// End tells the caller the outcome; it is the scheduler's Job.End, called
// once the permit was released. err is nil after Run, else why the
// activation never ran.
func (a *Activation) End(err error) {
	if !a.ended.CompareAndSwap(false, true) {
		panic("runner: activation ended twice")
	}
	switch {
	case err != nil:
		a.err = err
	case a.ran.Load():
		a.err = outcomeErrors[a.report.Outcome]
	default:
		a.err = ErrPlatformFailure // ended as run, but never given a cell: a scheduler fault
	}
	close(a.done)
}

// Done is closed when the activation has reached its terminal outcome and
// its reservation has been returned.
func (a *Activation) Done() <-chan struct{} { return a.done }

// Wait waits for the terminal outcome or for ctx to end, whichever is
// first. The error is nil for success, an outcome error from this
// package, a scheduler error for an activation that never ran, or ctx's
// cause if the caller stopped waiting (the activation carries on).
func (a *Activation) Wait(ctx context.Context) (Report, error) {
	select {
	case <-a.done:
		return a.report, a.err
	case <-ctx.Done():
		return Report{}, context.Cause(ctx)
	}
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
