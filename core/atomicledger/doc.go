// Package atomicledger is the node quota ledger: counter slots for every
// configured scope, preallocated at startup and indexed by the compiled
// policy's dense IDs, and the fixed-capacity live-activation table.
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
// # Concurrency
//
// One mutex serializes commits (reserve, start, release). Counters are
// atomics, each scope's on a cache line of its own (live and queued
// packed into one word), so readers never lock. A sequence
// counter is made odd before and even after each commit; [Ledger.PreCheck]
// reads it around its lock-free work and gives an answer only if nothing
// moved. The pre-check rejects a request whose scope is already full
// without touching the mutex, which keeps a rejection flood off the lock
// that valid admissions need.
//
// # Live-activation table
//
// Reservations are keyed by (tenant, activation ID), hashed with xxhash
// and folded with a per-process random key into a 64-bit fingerprint. Entries
// live in a pool sized from the node's live limit and never move; an open-addressing index (load factor at
// most one half, backward-shift deletion, no tombstones) maps
// fingerprints to entries. Each entry carries a generation bumped on
// reuse, and a [Ticket] names (entry, generation), so a stale release can
// never free another reservation. Nothing in the ledger grows with the
// number of distinct tenants, services or IDs that requests name.
//
// # Caveats
//
// The pre-check cannot prove a key absent when a fingerprint matches; such
// requests (real duplicates, or a 2^-64 collision) take the locked path.
package atomicledger
