// Package model is the reference implementation of admission: the
// decision order (docs/decision-table.md), ledger, permits and node load
// written as plainly as possible, so that the fast code in core can be
// held to it by
// differential, linearizability and fuzz tests, and so that benchmarks
// have a naive implementation to compare against.
//
// # Design
//
// Everything is the obvious thing. The policy is the decoded
// [policy.NodeAdmissionPolicy] (a private deep copy), looked up through
// maps keyed by name; it is never compiled. The ledger is a handful of
// maps keyed by strings: tenant ID, trust class name, queue class name,
// cell class name, and "tenant\x00activationID" for live reservations.
// One [sync.Mutex] in [Model] guards all of it. There is no lock-free
// pre-check, no preallocation and no fingerprinting; every rejection is a
// fresh [*Rejection] whose text is built with fmt.
//
// The inputs are core's: a [core.RevisionPolicySource] per [Controller]
// (swapped with [Controller.WithPolicySource]), a [core.NodeLoadSource]
// ([LoadState] is the model's own), and [core.AdmissionRequest]s. The
// outputs are comparable with core's: the same five error fields and
// text, [core.QuotaSnapshot]s, [policy.RevisionIdentity] and
// [core.Obligations] on a [Permit].
//
// # Decision order
//
// [Controller.AdmitAt] and [Controller.Admit] run the table's steps 1
// to 12 without the mutex (they read only immutable data), then take the
// mutex for step 13: read the clock again (Admit only; never earlier
// than the first reading), judge the caller deadline and the load sample
// again, then duplicate, capacity and feasibility, and only then commit.
// The effective deadline is bound from the first reading. A load sample
// observed after the first reading was published after it, so step 12
// judges it at a fresh reading instead of calling it future-dated. Admit reads
// the clock once before any check and once under the mutex, every time;
// core skips the first reading for requests that steps 1 to 4 reject,
// which no time can change, so the answers are the same.
//
// # Ledger
//
//	scope        live  queued  cpu fuel  memory
//	node          +1     +1      +fuel    +mem
//	tenant        +1     +1      +fuel    +mem
//	trust class   +1     +1      +fuel    +mem
//	queue class          +1
//	cell class    +1
//
// Admission adds the row; starting returns the queued column; release
// returns what the reservation still holds. Capacity is checked node,
// tenant, trust class, then queue class, and within a scope live, queued,
// fuel, memory; a shortfall is permanent (not retryable) when the
// reservation needs more than the whole limit.
//
// A tenant the policy's fleet block marks has one more scope, checked
// right after the tenant's: its published fleet slice
// ([Model.PublishFleetSlice], a map guarded by the same mutex). No slice,
// or a reading at or after the slice's deadline, is fleet-unavailable;
// live + 1 above the slice is capacity-exhausted at the fleet scope,
// always retryable.
//
// # Feasibility
//
//	local_wait = floor(n/p) * estimated_service
//	required   = max(local_wait, observed_queue_delay[class])
//	             + minimum_execution + safety_margin
//	reject when deadline - now <= required
//
// in unsigned 64-bit arithmetic with every intermediate compared against
// the largest time.Duration, so overflow is detected and rejects. The
// rejection is retryable unless deadline - now <= minimum_execution +
// safety_margin (it would fail with no wait at all) or the arithmetic
// overflowed.
//
// # Permits
//
// A [Permit] is a handle to a reservation record. An admission handle acts
// while the reservation is queued; [Permit.StartExecutionAt] returns an
// execution handle that acts while it executes. [Permit.StartExecution]
// reads the controller's clock under the mutex, never earlier than the
// admission's reading. A released reservation
// is dropped from the live set and marked released, and a new admission
// of the same key gets a new record, so a stale handle frees nothing.
//
// # Caveats
//
// The model is for tests and benchmarks only. It allocates on every call,
// grows its live map with use, and has no leak reclamation: a permit
// dropped without release keeps its reservation forever.
package model
