package core

import (
	"runtime"
	"sync/atomic"
	"weak"

	"latent.dev/admission/core/atomicledger"
)

// Leak reclaim without a finalizer per permit.
//
// A finalizer registered at admission and removed at release costs two
// trips into the runtime's specials per permit (about 100ns here, more
// than the whole commit), and nearly every permit is released within
// microseconds. So a new permit is not given one. It is held, instead,
// in a slot of the young table, one slot per ledger slot, which keeps it
// reachable. Once per garbage collection the young table is swept: every
// permit found there is taken out, and one still holding its reservation
// gets its finalizer then. A permit released before the sweep is cleared
// from its slot by the release and never meets the runtime's specials.
//
// A permit its holder drops is therefore reclaimed one collection later
// than with a finalizer from the start: the sweep after it was issued
// gives it the finalizer, the collection after that finds it unreachable.
// Each permit is tracked on its own, so a retained permit delays no
// other's reclaim. The table is sized at startup from the node live limit
// (a slot is indexed by the ticket's ledger slot, which no two live
// reservations share), and the sweep reads every slot: the cost per
// collection is one load per slot of the node live limit.

// youngPermits holds, by ledger slot, the permits issued since the last
// sweep and not yet released.
type youngPermits struct {
	slots []atomic.Pointer[permitBlock]
}

func newYoungPermits(slots uint64) *youngPermits {
	return &youngPermits{slots: make([]atomic.Pointer[permitBlock], slots)}
}

// hold keeps a newly issued permit reachable until the next sweep. Its
// slot is free: the reservation that held it before was released.
func (y *youngPermits) hold(tk atomicledger.Ticket, b *permitBlock) {
	y.slots[tk.Slot].Store(b)
}

// forget takes a released permit out of its slot and reports whether it
// was still there; false means a sweep took it first (and may have given
// it a finalizer) or a newer permit reuses the slot.
func (y *youngPermits) forget(tk atomicledger.Ticket, b *permitBlock) bool {
	return y.slots[tk.Slot].CompareAndSwap(b, nil)
}

// sweep empties the table and gives each permit in it that still holds
// its reservation the finalizer that reclaims it if it is dropped. A
// permit is taken out before its phase is read, so a concurrent release
// either clears it first (and the sweep skips it) or finds it gone and
// removes whatever finalizer the sweep set.
func (y *youngPermits) sweep() {
	for i := range y.slots {
		b := y.slots[i].Load()
		if b == nil || !y.slots[i].CompareAndSwap(b, nil) {
			continue
		}
		if ph := b.state.phase.Load(); ph == permitQueued || ph == permitExecuting {
			runtime.SetFinalizer(&b.permit, reclaimLeaked)
		}
	}
}

// collectionTick is an object no one references whose finalizer sweeps a
// young table and sets itself again, so it runs once per garbage
// collection on the runtime's finalizer goroutine; admission starts none
// of its own. It holds the table weakly: once the provider and every
// permit it issued are gone, the tick stops.
type collectionTick struct{ young weak.Pointer[youngPermits] }

// ticking counts the ticks still armed, for the test that a dropped
// provider leaves none behind.
var ticking atomic.Int64

func armCollectionTick(y *youngPermits) {
	ticking.Add(1)
	runtime.SetFinalizer(&collectionTick{weak.Make(y)}, onCollection)
}

func onCollection(t *collectionTick) {
	y := t.young.Value()
	if y == nil {
		ticking.Add(-1)
		return
	}
	y.sweep()
	runtime.SetFinalizer(t, onCollection)
}
