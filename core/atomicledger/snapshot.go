package atomicledger

import "latent.dev/admission/policy"

// Snapshot is every scope's counters read at one instant: the exact
// path's locks (mu and every stripe) are held while they are copied, so
// no reservation is half-counted, no stripe's room is counted twice, and
// the scopes agree with each other (the node's live count is the sum of
// the tenants', and so on).
type Snapshot struct {
	Node        Held
	Tenants     []Held   // by policy.TenantID
	TrustClass  []Held   // by policy.TrustClassID
	QueueQueued []uint64 // by policy.QueueClassID
	CellLive    [policy.NumCellClasses]uint64
}

// SnapshotInto fills s under the exact path's locks, taken once. It
// reuses s's slices when they are long enough, so a caller that keeps one
// Snapshot allocates only on its first call.
func (l *Ledger) SnapshotInto(s *Snapshot) {
	s.Tenants = resize(s.Tenants, l.trustBase-l.tenantBase)
	s.TrustClass = resize(s.TrustClass, l.queueBase-l.trustBase)
	s.QueueQueued = resize(s.QueueQueued, len(l.scopes)-l.queueBase)
	l.lockAll()
	defer l.unlockAll()
	s.Node = heldOf(l.usedOf(0))
	for i := range s.Tenants {
		s.Tenants[i] = heldOf(l.usedOf(l.tenantBase + i))
	}
	for i := range s.TrustClass {
		s.TrustClass[i] = heldOf(l.usedOf(l.trustBase + i))
	}
	for i := range s.QueueQueued {
		s.QueueQueued[i] = l.usedOf(l.queueBase + i)[QueuedReservations]
	}
	for i := range l.cell {
		s.CellLive[i] = l.cell[i].live()
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
