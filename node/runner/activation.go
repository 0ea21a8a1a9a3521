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
	Usage       Usage
	// Output is the guest's result for Succeeded and DeclaredError.
	Output []byte
}

// Activation is one activation's job and its caller's handle: the
// scheduler runs it (Run) or drops it (Abandon), exactly once, and the
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

	claimed atomic.Bool
	// report and err are written once, before done is closed.
	report Report
	err    error
}

// Run executes the activation; it is the scheduler's Job.Run. When it
// returns, the cell has been released or quarantined and exec released,
// in that order, and then the caller is told.
func (a *Activation) Run(ctx context.Context, exec *core.ExecutionPermit, lease *cellpool.Lease) {
	a.claim()
	rep := a.runner.execute(ctx, exec, lease, a.input)
	exec.Release()
	a.report, a.err = rep, outcomeErrors[rep.Outcome]
	close(a.done)
}

// Abandon records that the activation never ran; it is the scheduler's
// Job.Abandon, called after the permit was released.
func (a *Activation) Abandon(err error) {
	a.claim()
	a.err = err
	close(a.done)
}

func (a *Activation) claim() {
	if !a.claimed.CompareAndSwap(false, true) {
		panic("runner: activation run or abandoned twice")
	}
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
