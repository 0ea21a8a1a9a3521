package atomicledger

import "latent.dev/admission/policy"

// Snapshot is every scope's counters read at one instant: the ledger's
// mutex is held while they are copied, so no reservation is half-counted
// and the scopes agree with each other (the node's live count is the sum
// of the tenants', and so on).
type Snapshot struct {
	Node        Held
	Tenants     []Held   // by policy.TenantID
	TrustClass  []Held   // by policy.TrustClassID
	QueueQueued []uint64 // by policy.QueueClassID
	CellLive    [policy.NumCellClasses]uint64
}

// SnapshotInto fills s with the mutex held, taken once. It reuses s's
// slices when they are long enough, so a caller that keeps one Snapshot
// allocates only on its first call.
func (l *Ledger) SnapshotInto(s *Snapshot) {
	s.Tenants = resize(s.Tenants, len(l.tenant))
	s.TrustClass = resize(s.TrustClass, len(l.trust))
	s.QueueQueued = resize(s.QueueQueued, len(l.queue))
	l.mu.Lock()
	defer l.mu.Unlock()
	s.Node = l.node.held()
	for i := range l.tenant {
		s.Tenants[i] = l.tenant[i].held()
	}
	for i := range l.trust {
		s.TrustClass[i] = l.trust[i].held()
	}
	for i := range l.queue {
		s.QueueQueued[i] = l.queue[i].queued()
	}
	s.CellLive = l.cellLive
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
