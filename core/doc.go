// Package core decides whether one activation may run on this node and
// hands accepted work an affine permit that carries its reservation.
//
// # Composition
//
// One [LocalQuotaProvider] per node owns the compiled policy, the quota
// ledger ([atomicledger.Ledger]) and the operator counters. Controllers
// come from it: [LocalQuotaProvider.Controller] binds a pinned catalog view
// ([RevisionPolicySource]), a load source ([NodeLoadSource]) and a clock;
// [AdmissionController.WithPolicySource] swaps the view and keeps the
// ledger. Admission starts no goroutine, timer, file or socket, and all of
// its memory is allocated when the provider is built.
//
// # Decision order
//
// [AdmissionController.Admit] runs the decision table (docs/decision-table.md) in order, and the
// first failure is the answer:
//
//	 1 metadata entries, then bytes           invalid-argument
//	 2 identifiers; later-phase budget dims   invalid-argument
//	 3 principal authorization                 permission-denied
//	 4 priority: node, then tenant             permission-denied
//	 5 revision tuple against the pinned view  admission-rejected
//	 6 backend, state model, threading,        admission-rejected
//	   features; placement
//	 7 trust class                             permission-denied
//	 8 zero grant: fuel, memory, wall time     admission-rejected
//	 9 cell class: compatible, then permitted  admission-rejected / permission-denied
//	10 payload: node, then tenant              resource-exhausted
//	11 caller deadline                         deadline-exceeded
//	12 load sample, then CPU, memory pressure  unavailable / resource-exhausted
//	13 under the ledger's mutex, with the clock resampled: 11 and 12
//	   again, duplicate ID, capacity (node, tenant, fleet slice, trust,
//	   queue class), queue feasibility; then commit
//
// Steps 1 to 12 take no lock and allocate nothing. Before step 13, a
// lock-free pre-check rejects a request whose scope is already full
// without touching the mutex (see atomicledger). It decides at the first
// clock reading, at which steps 11 and 12 have just passed, so its answer
// is the one step 13 would give had no time passed; a request it cannot
// decide exactly (a possible duplicate, a Reserve in flight) goes on to
// the mutex. Step 13 is one short transaction: the key's fingerprint,
// the reservation and every earlier judgment are made before it.
//
// # Records and handles
//
// A source that keeps one immutable record per revision and hands out
// handles to them (a [RecordSource]; the catalog's Pin is one) lets
// admission skip verifying what the source already vouches for. When the
// request's [RevisionHandle] is one the controller's own source
// recognises, by pointer equality, and the request's identity == that
// record's, step 2 checks only the identity's lengths against the node's
// bounds and step 5 is the record itself. Any other request (no handle,
// another source's, an identity edited after resolution) is scanned at
// step 2 and looked up at step 5, so the decision order and every answer
// are the same either way; with the source's own handle and an edited
// identity, only the fields that differ from the record's are scanned
// (the others were validated by the source and are length-checked). Step 6's derivation from the revision's policy
// is kept in the record's slot, tagged with the provider it was derived
// for, so it runs once per record and provider; a plain
// [RevisionPolicySource] has no records, and it runs per request.
//
// # Clock reads
//
// On the live path the clock is read once after steps 1 to 10 (the
// request, the policy and the pinned catalog view, none of which time can
// change) and before steps 11 and 12; the effective deadline is bound to
// that reading. Under the mutex a second, monotonic-only reading
// (Clock.Since) decides step 13. StartExecution likewise measures elapsed
// monotonic time from the admission reading instead of reading the wall
// clock again. A request rejected by steps 1 to 10 reads no clock at all.
//
// # Errors
//
// Every rejection is an [Error]: a small value naming one row of a table
// built before the first request (see [AllErrors]), found with errors.As
// into a core.Error and read through its methods, so returning one
// allocates nothing and no caller can change what another sees. Its
// fields and text come from fixed vocabulary only: no identifier, tenant,
// subject, attribute, number or load reading ever appears.
//
// # Permits
//
// [AdmissionPermit] and [ExecutionPermit] are affine: only a controller
// issues live ones, the zero value is inert, and go vet rejects copies
// (noCopy). A permit is the one allocation of an admission (112 bytes,
// its pointers first). StartExecution resamples the clock in its ledger
// transaction,
// returns only the queued slots, and on failure has released the permit.
// Release is idempotent and a reused live-table entry has a new
// generation, so a stale release frees nothing. A permit dropped without
// release is reclaimed by a finalizer the collector runs, and counted as
// leaked.
//
// # Recording
//
// Every ledger transaction takes the next place in one total order
// under the ledger's mutex. A decision reads its clock and load through
// helpers (inputs.go) that read the controller's own, or, for a decision
// made with [AdmissionController.AdmitWith], that decision's [Inputs]:
// one method per reading, named for the step that takes it (the first
// reading, step 12's resample and sample, the commit's reading and
// sample), so that a recorder keeps each reading by its label and a
// replay answers each label, however many times the decision reads it.
// The decision table (steps.go) holds no recording field or branch. A
// recording provider ([NewRecordingProvider]) reports the orders, to a
// decision's Inputs and to its [Journal]; a decision made with AdmitWith
// on it is never refused by the lock-free pre-check, so that its order
// places it where it took effect. The ledger is the same one either way.
//
// # Node load
//
// [NodeLoadState] is published into by a trusted sampler and read
// lock-free. Missing, malformed, future-dated, stale and out-of-order
// samples fail closed until a valid newer one arrives.
//
// # Fleet slices
//
// A tenant the policy's fleet block marks is also held to this node's
// slice of a fleet-wide limit on its live activations, which a trusted
// broker publishes with [LocalQuotaProvider.PublishFleetSlice] (a slice
// and the local deadline it is valid until) into a fixed array by tenant
// ID, as a sampler publishes load. Each entry is a latch (two copies and
// a sequence counter), so a reader never pairs one publish's slice with
// another's deadline and a publish allocates nothing. Admission reads it
// lock-free in the pre-check and again in step 13's transaction, after
// the tenant scope: live + 1 must not exceed the slice, and the reading
// must be before the deadline; no slice, or an expired one, fails
// closed. Admission makes no network call for it.
package core
