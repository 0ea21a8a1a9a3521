// Package cellpool is the node's fixed execution-cell pool: per configured
// cell class, exactly the configured parallelism of cells, handed out as
// affine leases.
//
// # Design
//
// [New] allocates every slot once; nothing grows afterwards. A cell is in
// one of three states:
//
//	free ──Acquire──▶ leased ──Release────▶ free
//	                     └────Quarantine──▶ quarantined ──Replenish──▶ free (new generation)
//
// [FixedCellPool.Acquire] never blocks: with no free cell it answers
// [ErrNoFreeCell], and the caller waits on [FixedCellPool.Changed], a
// channel closed at the next release, quarantine, replenish or close, so
// nobody polls. A [Lease] ends exactly once, by its owner: Release when
// the backend vouches for the cell, Quarantine when it cannot. A
// replenished slot carries a new generation, so the [CellID] of a
// replacement never equals that of the cell it replaces.
//
// # Agreement with admission
//
// Admission plans queue delay with the configured parallelism p
// (local_wait = floor(n/p) * estimated_service) and never looks at the
// pool. When quarantine leaves u < p usable cells, that estimate
// over-promises. The pool therefore computes a floor for the class's
// observed queue delay,
//
//	u == p: 0
//	u == 0: StopDelay (the node wall-time ceiling; no grant can wait it,
//	        so admission of the class stops)
//	else:   min(floor(MaxBacklog/u) * estimated_service, StopDelay)
//
// ([FixedCellPool.QueueDelayFloor]), which the node's sampler reads with
// the scheduler's oldest wait (pipeline.QueueDelay) before each publish. Admission takes
// max(local_wait, observed), so it plans with the cells that exist until
// Replenish brings pool and configuration back into agreement and the
// next publish lowers the delay again. Rejections it causes are
// queue-deadline-infeasible and retryable, since the observed delay is
// non-zero.
//
// # Invariants
//
//   - Free + Leased + Quarantined = Configured for every class, at all
//     times.
//   - A cell is leased to at most one Lease; a quarantined cell is never
//     handed out again.
//   - Ending a lease twice, or the zero Lease, does nothing and reports
//     false.
//
// # Caveats
//
// The pool does not publish load itself: the node's sampler owns the
// sequence numbers of [core.NodeLoadState] and reads the floor at each
// sample. Between a quarantine and that
// publish, admission may still plan with the old parallelism. The floor
// uses the node's live-activation limit as the worst backlog, which is
// conservative by design; with a zero service estimate it is zero for a
// partially degraded class. Mutating methods take one short mutex; the
// pool is meant for one dispatcher, not as a contended hot path.
package cellpool
