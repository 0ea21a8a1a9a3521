// Package pipeline wires the node's downstream of admission together: a
// [cellpool.FixedCellPool] sized from the admission policy, a
// [scheduler.Scheduler] over it and a [runner.Runner] with the node's
// backends. It is what an embedding node (or cmd/stress) runs behind an
// [core.AdmissionController].
//
// # Use
//
//	p, err := pipeline.New(provider, pipeline.Config{Backends: backends})
//	base := p.Counters()
//	act, err := p.Submit(ctx, permit, input) // or p.Invoke(ctx, controller, req, input)
//	report, err := act.Wait(waitCtx)
//	...
//	p.Drain()          // or p.Close() to drop what is queued
//	p.ReplenishAll()   // repair quarantined cells
//	diff := p.Counters().Diff(base) // empty when every reservation came back
//
// The sampler reads [Pipeline.QueueDelay] (the scheduler's oldest wait
// per cell class, raised to the pool's floor for a class that lost
// cells) and publishes into the node's core.NodeLoadState itself: load
// flows one way, from the scheduler and the pool through the sampler into
// core.
//
// # Invariants
//
// Once every activation has ended (after Drain), [Counters] equals its
// value before the first one: the ledger's node, tenant, trust-class,
// queue-class and cell-class counters, the live table, the scheduler's
// queues and executions, and the pool's cells, quarantined cells aside
// until they are replenished. [Counters.Residue] names anything still held.
//
// # Caveats
//
// Counters reads each counter separately, not as one snapshot; compare
// it only when the pipeline is quiet. The scheduler's executing count
// drops a moment after the caller hears the outcome (the reservation and
// cell are back before that).
package pipeline
