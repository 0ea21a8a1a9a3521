package runner

import (
	"context"
	"sync/atomic"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
)

// Report is an activation's terminal report.
type Report struct {
	Outcome     Outcome
	Disposition Disposition
	Cell        cellpool.CellID
	Consumed    Consumption
	// Output is the guest's result for Succeeded and DeclaredError.
	Output []byte
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
