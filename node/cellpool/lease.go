package cellpool

import "sync/atomic"

// Lease states.
const (
	leaseHeld uint32 = iota + 1
	leaseReleased
	leaseQuarantined
)

// Lease is the exclusive right to use one cell. Exactly one owner holds
// it and ends it exactly once: Release when the cell is known to be clean
// and reusable, Quarantine when its state is uncertain. Only the pool
// issues live leases; the zero value is inert.
//
// A Lease must not be copied after first use.
type Lease struct {
	noCopy noCopy

	pool *FixedCellPool
	cell CellID

	// state changes only under the pool's mutex and is read lock-free.
	state atomic.Uint32
}

// Cell names the leased cell.
func (l *Lease) Cell() CellID {
	if l == nil {
		return CellID{}
	}
	return l.cell
}

// Held reports whether the lease has not been ended yet.
func (l *Lease) Held() bool { return l != nil && l.state.Load() == leaseHeld }

// Release returns the cell to the pool for reuse. It reports false, and
// does nothing, if the lease was already ended or is the zero value.
func (l *Lease) Release() bool {
	if !l.Held() {
		return false
	}
	return l.pool.dispose(l, leaseReleased)
}

// Quarantine removes the cell from usable capacity: the pool never hands
// it out again until Replenish replaces it. It reports false, and does
// nothing, if the lease was already ended or is the zero value.
func (l *Lease) Quarantine() bool {
	if !l.Held() {
		return false
	}
	return l.pool.dispose(l, leaseQuarantined)
}
