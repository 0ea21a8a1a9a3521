package runner

import (
	"context"
	"maps"

	"github.com/puzpuzpuz/xsync/v3"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/policy"
)

// Guest is what a backend is asked to run: the admitted identity, the
// obligations it must enforce inside the guest (threading, state model,
// features, call depth), the cell, the input and the meter.
type Guest struct {
	ActivationID string
	Revision     policy.RevisionIdentity
	Obligations  core.Obligations
	Cell         cellpool.CellID
	Input        []byte
	Meter        *Meter
}

// Backend executes guests on cells.
type Backend interface {
	// Run executes g on g.Cell and returns only once the guest has
	// stopped: no guest thread may still touch the cell or the meter.
	// It stops the guest when ctx ends (deadline or cancellation) or the
	// meter refuses a charge, and then reports ExitInterrupted.
	Run(ctx context.Context, g *Guest) Exit
	// Reset returns the cell to a clean state after any exit. An error
	// means the backend cannot vouch for the cell, which the runner then
	// quarantines.
	Reset(cell cellpool.CellID) error
}

// Config configures a runner.
type Config struct {
	// Backends by the name a revision's policy gives (Obligations.Backend).
	Backends map[string]Backend
	// Clock measures wall time and judges the deadline; nil is the system
	// clock. It must be the admission controller's clock, because the
	// deadline was bound on it.
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
	if r.clock == nil {
		r.clock = deadline.System{}
	}
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

// execute runs one activation to its terminal outcome and disposes of the
// cell; the caller releases exec afterwards. The order is the point: the
// guest stops, accounting is finalized, the cell is released or
// quarantined, and only then may the reservation go.
func (r *Runner) execute(ctx context.Context, exec *core.ExecutionPermit, lease *cellpool.Lease, input []byte) Report {
	g := exec.Grant() // one copy: it is built field by field from the permit
	o := &g.Obligations
	rep := Report{Cell: lease.Cell()}
	backend := r.backends[o.Backend]
	if backend == nil || lease.Cell().Class != o.CellClass {
		// Running on another backend or cell class than the one admitted
		// would break the grant; the guest never started, so the cell is
		// as clean as it was.
		rep.Outcome = PlatformFailure
		r.dispose(lease, true, &rep)
		return rep
	}
	meter := newMeter(g.Budget.CPUFuel, g.Budget.MemoryBytes, g.Deadline)
	guest := &Guest{ActivationID: g.ActivationID, Revision: g.Revision, Obligations: *o, Cell: lease.Cell(),
		Input: input, Meter: meter}
	start := r.clock.Now()
	exit, stopped := runGuest(ctx, backend, guest)
	end := r.clock.Now()
	rep.Consumed = meter.consumption(end.Sub(start))
	rep.Outcome = PlatformFailure
	if stopped {
		rep.Outcome = classify(exit, meter, ctx.Err() != nil, end)
	}
	if rep.Outcome == Succeeded || rep.Outcome == DeclaredError {
		rep.Output = exit.Output
	}
	// A backend that panicked may have left anything behind; it is not
	// asked to vouch for the cell.
	r.dispose(lease, stopped && resetCell(backend, lease.Cell()), &rep)
	return rep
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

// resetCell asks the backend to clean the cell; a panic counts as an
// uncertain cleanup.
func resetCell(b Backend, cell cellpool.CellID) (clean bool) {
	defer func() {
		if recover() != nil {
			clean = false
		}
	}()
	return b.Reset(cell) == nil
}
