package atomicledger

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"latent.dev/admission/policy"
)

// Fingerprint is the 64-bit hash of a (tenant, activation ID) key. Zero is
// never a fingerprint: it marks an entry never used.
type Fingerprint uint64

// fingerprintKey keys fingerprints. It is chosen per process: nothing
// outside memory ever holds a fingerprint, and a key that nobody outside
// the process knows keeps whoever chooses activation IDs from aiming them
// at one chain of the index. The top bit of the second half is set, so
// that half XORed with a tenant ID is never zero.
var fingerprintKey = [2]uint64{rand.Uint64(), rand.Uint64() | 1<<63}

// FingerprintOf hashes a live-table key: xxhash of the activation ID,
// XORed with one half of the process's key, folded by one 128-bit
// multiplication with the tenant XORed with the other half. The tenant is
// part of the key, so one tenant can neither block nor detect another
// tenant's IDs.
func FingerprintOf(tenant policy.TenantID, activationID string) Fingerprint {
	hi, lo := bits.Mul64(xxhash.Sum64String(activationID)^fingerprintKey[0], uint64(uint32(tenant))^fingerprintKey[1])
	if h := hi ^ lo; h != 0 {
		return Fingerprint(h)
	}
	return 1
}

// entry is one live reservation, or a free one. Entries never move: a
// permit names its entry by index and generation. Guarded by Ledger.mu;
// fingerprint and next are atomics because the pre-check walks chains
// lock-free. An entry holds no pointer (its activation ID is in
// liveTable.ids), so the collector never scans the entries.
type entry struct {
	fingerprint atomic.Uint64 // 0 until first used; a free entry keeps its last key's
	next        atomic.Uint32 // the next entry of its chain, as index+1; 0 ends it
	live        bool
	executing   bool
	generation  uint32 // bumped on every reuse, skipping 0, so a stale ticket never matches
	reservation Reservation
	// One entry per line: two cores' reservations, handed out side by
	// side from the free stack, do not share one.
	_ [cacheLine - 56]byte
}

// liveTable is the fixed-capacity live-activation table: a pool of
// maxLive entries and a chained hash index from fingerprint to entry (at
// least two buckets per entry, so chains stay short) and a stack of
// the free entries. Every field is guarded by Ledger.mu; buckets and the
// entries' fingerprint and next are also read lock-free. Nothing in it
// grows after construction.
//
// A removal unlinks an entry without hiding any other: a lock-free walk
// already on the removed entry still follows its old next. So while no
// insert runs, a walk that finds no fingerprint proves the key absent at
// the instant it started, whatever removals run meanwhile.
type liveTable struct {
	entries []entry
	// ids holds entry i's activation ID at i: apart from the entries, so
	// that a collection reads a sixth of the memory to mark them.
	ids     []string
	buckets []atomic.Uint32 // head of each chain, as index+1; 0 is empty
	mask    uint64
	free    []uint32 // the free entries' indexes; the top is handed out next
}

func newLiveTable(maxLive uint64) liveTable {
	size := uint64(2)
	if maxLive > 0 {
		size = 1 << bits.Len64(maxLive*2-1)
	}
	t := liveTable{
		entries: make([]entry, maxLive),
		ids:     make([]string, maxLive),
		buckets: make([]atomic.Uint32, size),
		mask:    size - 1,
		free:    make([]uint32, maxLive),
	}
	for i := range t.free {
		t.free[i] = uint32(maxLive) - 1 - uint32(i)
	}
	return t
}

// popLocked takes a free entry off the stack.
func (t *liveTable) popLocked() (uint32, bool) {
	top := len(t.free) - 1
	if top < 0 {
		return 0, false
	}
	i := t.free[top]
	t.free = t.free[:top]
	return i, true
}

// mayContain reports whether the key with fingerprint fp may be live. A
// false answer is exact only if no insert ran concurrently; the caller
// brackets the call with the ledger's sequence counter. The walk is
// bounded, since a chain read while it changes may lead anywhere.
func (t *liveTable) mayContain(fp Fingerprint) bool {
	next := t.buckets[uint64(fp)&t.mask].Load()
	for n := 0; next != 0 && n <= len(t.entries); n++ {
		e := &t.entries[next-1]
		if e.fingerprint.Load() == uint64(fp) {
			return true
		}
		next = e.next.Load()
	}
	return false
}

// findLocked returns the entry index holding (tenant, id), or -1.
func (t *liveTable) findLocked(fp Fingerprint, tenant policy.TenantID, id string) int {
	for next := t.buckets[uint64(fp)&t.mask].Load(); next != 0; {
		e := &t.entries[next-1]
		if e.fingerprint.Load() == uint64(fp) && e.reservation.Tenant == tenant && t.ids[next-1] == id {
			return int(next - 1)
		}
		next = e.next.Load()
	}
	return -1
}

// insertLocked makes a free entry the live reservation of (fp, id) and
// returns its ticket. The caller guarantees the key is absent and a free
// entry exists (the node live limit is checked first and sizes the
// table). The entry is complete before its bucket points to it.
func (t *liveTable) insertLocked(fp Fingerprint, id string, r *Reservation) Ticket {
	ei, ok := t.popLocked()
	if !ok {
		panic("atomicledger: Reserve with no free live-table entry")
	}
	e := &t.entries[ei]
	// A ticket is released once, under the mutex, before its entry is
	// reused: 2^32-1 reuses of one entry before a stale ticket could
	// match again is margin enough. 0 is never a ticket's.
	if e.generation++; e.generation == 0 {
		e.generation = 1
	}
	e.live = true
	e.executing = false
	t.ids[ei] = id
	e.reservation = *r
	b := &t.buckets[uint64(fp)&t.mask]
	e.next.Store(b.Load())
	e.fingerprint.Store(uint64(fp))
	b.Store(ei + 1)
	return Ticket{Slot: ei, generation: e.generation}
}

// entryLocked returns the entry a ticket names if it is still live.
func (t *liveTable) entryLocked(tk Ticket) *entry {
	if int(tk.Slot) >= len(t.entries) || tk.generation == 0 {
		return nil
	}
	e := &t.entries[tk.Slot]
	if !e.live || e.generation != tk.generation {
		return nil
	}
	return e
}

// removeLocked unlinks live entry ei from its chain, clears it and puts
// it on the free list. A lock-free reader already on ei may still follow
// its old next, and may still match its old fingerprint, which stays:
// that reader's walk overlaps the Release, whose odd sequence counter
// makes its answer one the pre-check does not trust, and no walk that
// starts later reaches ei until an insert links it again with its new
// fingerprint.
func (t *liveTable) removeLocked(ei uint32) {
	e := &t.entries[ei]
	b := &t.buckets[e.fingerprint.Load()&t.mask]
	if b.Load() == ei+1 {
		b.Store(e.next.Load())
	} else {
		prev := &t.entries[b.Load()-1]
		for prev.next.Load() != ei+1 {
			prev = &t.entries[prev.next.Load()-1]
		}
		prev.next.Store(e.next.Load())
	}
	e.live = false
	e.executing = false
	t.ids[ei] = ""
	e.reservation = Reservation{}
	t.free = append(t.free, ei)
}

// liveCountLocked is the number of live entries.
func (t *liveTable) liveCountLocked() int { return len(t.entries) - len(t.free) }
