// Package scheduler queues admitted activations and dispatches them onto
// cells: priority across queue classes with a starvation bound, weighted
// fairness across tenants within a class, and strict ownership of every
// permit it is given.
//
// # Ownership
//
// [Scheduler.Submit] takes the [core.AdmissionPermit] with its [Job] in
// every case. From then on exactly one of these happens, once:
//
//   - Submit refuses (queue class full, closing, context done, deadline
//     passed, unknown class): the permit is released and Submit returns
//     the error; the job is never called.
//   - The activation is dropped while queued (context done, deadline
//     passed, Close): the permit is released, then Job.End is called with
//     the reason.
//   - The dispatcher, with a cell free, checks the context and
//     EnsureSchedulableAt on the scheduler's clock, leases the cell, and
//     calls StartExecution. If that fails (core has released the permit)
//     the lease is released, since the cell was never used, and
//     Job.End is called with the reason.
//   - Otherwise Job.Run gets the permit's [core.Grant] (taken once, at
//     Submit) and the lease on a worker goroutine, never the
//     [core.ExecutionPermit], which is the scheduler's. Run ends the lease (release or quarantine)
//     once the guest has stopped and accounting is final; the permit
//     stays the scheduler's. When Run returns, the scheduler quarantines
//     a lease still held (its state is unknown), releases the execution
//     permit (its one release) and calls Job.End(nil).
//
// So each permit has one owner at each stage and one release: the
// admission permit is the scheduler's from Submit until it is refused,
// dropped or started, the execution permit the scheduler's worker's until
// Run returns.
//
// Each activation runs under the submit context bounded by the permit's
// deadline (context.WithDeadlineCause with [ErrExpired]), so one
// context.AfterFunc callback drops queued work on either cancellation or
// expiry, with no goroutine per waiting activation, and the runner sees
// the same deadline. The deadline is the one bound at admission; nothing
// here resets it.
//
// # Dispatch order
//
// Submit finds a permit's queue class by one index on its priority, in a
// table New builds from the policy (one entry per priority up to the
// node's maximum, at most 65,536 of 4 bytes), and refuses a permit whose
// class by that table is not the one its grant names (another policy's).
//
// Queues are kept per (cell class, queue class), because cell classes are
// independent resources: a backlog for busy tiny cells must not hold
// back work for free small ones. For each cell class with a free cell:
//
//  1. Queue class: the highest-priority class with work, unless a lower
//     class with work has been passed over StarvationBound times by
//     dispatches of higher classes (it is starved); then the
//     highest-priority starved class. A starved class is served before
//     everything but higher-priority starved classes, each of which is
//     served once and is then not starved again for another
//     StarvationBound dispatches. With two queue classes, as in the
//     example policy, a waiting lower class is therefore passed over at
//     most StarvationBound times in a row.
//  2. Tenant: deficit round robin over the tenants' FIFO flows, quantum =
//     weight (default 1), cost = one activation. Two tenants that stay
//     backlogged receive service in the ratio of their weights, within
//     one round, however much either submits.
//  3. The head activation is checked (context, then EnsureSchedulableAt)
//     immediately before the cell is leased; a dead one is dropped
//     without being charged to its tenant, and the pick repeats.
//
// # Concurrency
//
// One dispatcher goroutine leases cells; it sleeps on a kick channel
// (new work) and the pool's Changed channel (a cell freed), never
// polling. mu guards the queues; lock order is mu, then the pool's mutex.
// Permit calls (the ledger mutex) and Job methods never run under mu.
// Close drops the queue, stops the dispatcher and waits for every Run
// goroutine and every in-flight cancellation callback, so nothing
// outlives it; Drain first lets the queue run dry.
//
// Started activations run on worker goroutines, at most one per
// configured cell, each kept for the next activation once its own has
// ended: a start hands the activation to an idle worker, spawns one
// while there are fewer workers than cells, and otherwise waits for a
// worker to finish ending its activation (the started one holds a cell,
// so some worker has finished its Run). A kept worker keeps the stack
// the guest grew, so a start neither spawns a goroutine nor grows a new
// stack. Once Close has begun the idle workers leave, and a start then
// runs on a goroutine of its own.
//
// # Observed queue delay
//
// [Scheduler.OldestWait] is the load sampler's queue-delay input: per
// cell class, the wait of the oldest activation now queued. Arrival times
// are read on the scheduler's clock under mu, so a flow's head is its
// oldest item and the scan visits one item per backlogged tenant.
//
// [Scheduler.QueueWaits] is the record of waits that ended: when the
// dispatcher takes an activation off its queue onto a cell, its wait
// since Submit (same clock) goes into its queue class's histogram, a
// fixed array of atomic counts over [QueueWaitBounds], one per configured
// queue class. Recording allocates nothing; dropped activations are not
// recorded.
//
// # Caveats
//
// Fairness counts activations, not their cost: a tenant whose activations
// run longer receives more cell time for the same share of dispatches.
// Flows exist only while they hold work, so a tenant that goes idle
// starts its next turn fresh (no credit is banked). Close does not cancel
// running activations; it waits for them. Queued expiry timers run on
// real time, while the dispatch check uses the injected clock.
package scheduler
