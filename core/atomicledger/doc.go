// Package atomicledger is the node quota ledger: counters for every
// configured scope, preallocated at startup and indexed by the compiled
// policy's dense IDs, sharded into stripes, and the fixed-capacity
// live-activation table.
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
// # Stripes and rooms
//
// The ledger has one stripe per GOMAXPROCS at [New] (at most 64), each
// with its own mutex on lines of its own. A transaction ([Ledger.Update])
// holds one stripe: a sync.Pool hands each P the stripe it used last, so
// a core keeps its stripe's lines. No core ID and no pointer value
// chooses a stripe, and which stripe runs a transaction never changes an
// answer.
//
// A scope whose every limited dimension allows at least 8 per stripe is
// sharded, like the percpu_counter of Linux: each stripe holds a room,
// an allotment of the scope's capacity that it hands out and takes back
// under its own mutex alone, and the rest sits in the scope's pool. A
// smaller scope (a tenant allowed a handful) is unsharded: its counters
// are what its reservations hold, moved by compare-and-swap that never
// passes the limit. So at every instant, for every scope and dimension,
// used = limit - pool - the sum of the rooms (sharded), or used is the
// counter (unsharded), and neither can exceed the limit.
//
// The fast path of a commit claims the reservation from its stripe's
// rooms (and by compare-and-swap at unsharded scopes) and a free
// live-table entry from its stripe's list; a start and a release return
// capacity to the rooms of the stripe they run on, since a return needs
// no decision. The exact path is mu with every stripe held: it counts
// the rooms, so it sees every scope's true total, refuses only when that
// leaves no room, drains the rooms into the pool when the pool alone is
// short, and tops up the requesting stripe's room and entry list. A fast
// transaction that would refuse (its room or an unsharded scope short,
// or the backlog bound below) gives back what it claimed and runs again
// on the exact path: refusals at a limit are exact.
//
// # Linearization point
//
// A commit on the fast path linearizes when it raises its cell class's
// backlog (Tx.CellBacklog), with its key's bucket locked and its capacity
// claimed; on the exact path, anywhere inside the locks. What SPEC calls
// "under the mutex" now means inside the commit's transaction, before
// that point:
//
//   - step 13's clock resample is taken inside the transaction, after
//     its stripe is held and before the linearization point;
//   - the feasibility backlog n: the fast path reads the backlog as it
//     raises it, an upper bound of n at that instant (it may count other
//     stripes' raises that will be given back, never fewer than the live
//     reservations, since a release lowers it last). A request the bound
//     admits is feasible with the exact n; one it would refuse runs on the
//     exact path, where n is exact;
//   - duplicates: the key's bucket is locked from the check to the insert.
//
// A release linearizes when it first returns capacity.
//
// # Reads
//
// [Ledger.PreCheck] is lock-free: every stripe's sequence counter is odd
// while a transaction there moves what a lock-free reader loads (the
// unsharded counters, the pools, the live table), and the pre-check
// trusts an answer only when the counters' sum is even and unchanged
// around its work. It reads the unsharded counters and the sharded pools
// only: a sharded scope whose pool alone has room certainly has room,
// and one whose pool is short may have room parked in some stripe, which
// only the exact path counts, so that rejection takes the exact path.
// Capacity rejections at unsharded scopes stay lock-free.
//
// [Ledger.SnapshotInto], the per-scope reads and [Ledger.LiveEntries]
// take the exact path's locks, once: they are consistent across scopes
// and exact, and they are for operators, not the admission path.
//
// # Live-activation table
//
// Reservations are keyed by (tenant, activation ID), hashed with xxhash
// and folded with a per-process random key into a 64-bit fingerprint. Entries live in a
// pool sized from the node's live limit and never move; a chained index
// (at least two buckets per entry) maps fingerprints to entries, each
// bucket guarded by one of up to 256 bucket locks, so two transactions
// of different keys rarely wait on each other. Free entries sit on the
// stripes' free lists and the table's own. Each entry carries a
// generation bumped on reuse, and a [Ticket] names (entry, generation),
// so a stale release can never free another reservation. Nothing in the
// ledger grows with the number of distinct tenants, services or IDs that
// requests name.
//
// # Lock order
//
// mu, then the stripes in index order (the exact path); a stripe, then
// one bucket lock (the fast path). The exact path takes no bucket lock:
// every fast transaction holds its stripe, so none is in flight.
//
// # Caveats
//
// The pre-check cannot prove a key absent when a fingerprint matches; such
// requests (real duplicates, or a 2^-64 collision) take a transaction.
// A transaction touches one key: a second sends it to the exact path,
// which is a misuse (a panic) once it has moved something.
package atomicledger
