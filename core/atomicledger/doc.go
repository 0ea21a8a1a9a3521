// Package atomicledger is the node quota ledger: counters for every
// configured scope, preallocated at startup and indexed by the compiled
// policy's dense IDs, one short mutex for the transactions that move
// them, lock-free reads, and the fixed-capacity live-activation table.
//
// # Scopes and dimensions
//
//	scope        live  queued  cpu fuel  memory  limit source
//	node          +1     +1      +fuel    +mem    node.limits
//	tenant        +1     +1      +fuel    +mem    tenants[i].limits
//	trust class   +1     +1      +fuel    +mem    trust_classes[i].limits
//	queue class          +1                       queue_classes[i].max_queued
//	cell class    +1                              (no limit: the backlog n of
//	                                               the feasibility check)
//
// Admission adds the row; StartExecution returns the queued column only;
// release returns whatever the reservation still holds. Capacity is
// checked scope-major in the order node, tenant, trust class, queue class
// and, within a scope, live, queued, fuel, memory; the first dimension
// without room is the answer, and it is permanent when the reservation
// would not fit even an empty scope. Every check happens before any
// counter moves; zero grants nothing.
//
// Each scope's counters (live and queued packed in one word, fuel,
// memory) and its limits share one cache line, and no other scope's
// counters are on it.
//
// # One mutex
//
// Every transaction holds the ledger's one mutex: a commit (Tx.Assess,
// which reads what Tx.Contains, Tx.Shortfall and Tx.CellBacklog answer
// one by one, then Tx.Reserve), a start (Tx.Start), a
// release or a reclaim (Tx.Release). [Ledger.Begin] is the only way to
// take it and hands out the [Tx], which is valid until its [Tx.End]
// ([Ledger.Update] is Begin, a function and End), so a transaction's
// methods are the Locked operations: every function whose name ends in
// Locked runs with that mutex held, and every field marked "guarded by
// mu" is touched only then. Begin and End rather than a function to run
// spare the hot path a closure and its indirect call; a caller that runs
// anything between them that can panic (an embedder's clock or load
// source) defers End. Nothing that can run before the mutex runs inside
// it: the caller hashes the key, builds the reservation and judges the
// request before it calls Begin, and only the checks
// that must see every earlier commit (the duplicate, the capacity, the
// backlog) and the moves run inside.
//
// A transaction linearizes at its mutex: two transactions' effects are
// in the order they took it. That order is also the recording's total
// order: each Begin takes the next number ([Tx.Order]) under the mutex,
// and [Ledger.NextOrder] takes one for an event that moves nothing. There
// is no second mode: every ledger orders its transactions this way.
//
// # Lock-free reads
//
// The counters are atomics, so [Ledger.PreCheck] and the per-scope reads
// never take the mutex. [Ledger.PreCheck] answers a rejection exactly,
// without the mutex, when a reservation certainly does not fit:
//
//   - every write (a Reserve, a Start, a Release) keeps a sequence
//     counter odd while it moves the scopes one after another; a
//     pre-check trusts what it read only when the counter was even
//     before and unchanged after, so what it read is one whole state, and
//     the rejection linearizes at its last read. Giving capacity back in
//     the reverse of the checking order would keep one pre-check's reads
//     consistent, but not two pre-checks with each other: one that saw a
//     tenant's slot back and a later one that saw the node's not yet
//     admit no single instant for the release (the fleet's porcupine
//     check caught such a pair);
//   - the duplicate answer comes before capacity, so the pre-check looks
//     the key up (a lock-free walk of its chain) inside the same window;
//     a removal never hides another key, and an insert is a Reserve.
//
// A request that fits reads the sequence counter and the counters once:
// the transaction decides it anyway. The pre-check hands it a [Room], and
// the transaction that finds the counter unchanged (no write since)
// skips its own capacity reads ([Tx.Assess]).
//
// [Ledger.SnapshotInto] and [Ledger.LiveEntries] take the mutex once:
// they are consistent across scopes and exact, and they are for
// operators, not the admission path.
//
// # Live-activation table
//
// Reservations are keyed by (tenant, activation ID), hashed with xxhash
// and folded with a per-process random key into a 64-bit fingerprint.
// Entries live in a pool sized from the node's live limit and never
// move; free entries sit on a stack. A chained index (at least two
// buckets per entry) maps fingerprints to entries; its heads and links
// are atomics so that the pre-check can walk a chain without the mutex.
// Each entry carries a generation bumped on reuse, and a [Ticket] names
// (entry, generation), so a stale release can never free another
// reservation. Nothing in the ledger grows with the number of distinct
// tenants, services or IDs that requests name.
//
// # Caveats
//
// The pre-check cannot prove a key absent when a fingerprint matches;
// such requests (real duplicates, or a 2^-64 collision) take a
// transaction. Reserve trusts its caller to have checked the key and the
// capacity in the same transaction.
package atomicledger
