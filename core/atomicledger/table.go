package atomicledger

import (
	"math/bits"
	"math/rand/v2"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"latent.dev/admission/policy"
)

// Fingerprint is the 64-bit hash of a (tenant, activation ID) key. Zero is
// never a fingerprint: it marks an empty index slot.
type Fingerprint uint64

// fingerprintKey keys fingerprints. It is chosen per process: nothing
// outside memory ever holds a fingerprint, and a key that nobody outside
// the process knows keeps whoever chooses activation IDs from aiming them
// at one probe run of the index. The top bit of the second half is set,
// so that half XORed with a tenant ID is never zero.
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

// entry is one live reservation. Entries never move: a permit names its
// entry by index and generation. Guarded by Ledger.mu.
type entry struct {
	generation  uint64 // bumped on every reuse, so a stale ticket never matches
	live        bool
	executing   bool
	fingerprint Fingerprint
	id          string
	reservation Reservation
}

// indexSlot maps a fingerprint to an entry. fingerprint is read lock-free;
// entryIndex is guarded by Ledger.mu.
type indexSlot struct {
	fingerprint atomic.Uint64
	entryIndex  uint32
}

// liveTable is the fixed-capacity live-activation table: a pool of
// maxLive entries with a free stack, and an open-addressing index (linear
// probing, backward-shift deletion, load factor at most one half) from
// fingerprint to entry. Nothing in it grows after construction.
type liveTable struct {
	entries []entry
	free    []uint32 // stack of unused entry indexes
	index   []indexSlot
	mask    uint64
}

func newLiveTable(maxLive uint64) liveTable {
	size := uint64(2)
	if maxLive > 0 {
		size = 1 << bits.Len64(maxLive*2-1)
	}
	t := liveTable{
		entries: make([]entry, maxLive),
		free:    make([]uint32, maxLive),
		index:   make([]indexSlot, size),
		mask:    size - 1,
	}
	for i := range t.free {
		t.free[i] = uint32(maxLive) - 1 - uint32(i)
	}
	return t
}

// mayContain reports whether the key with fingerprint fp may be live. A
// false answer is exact only if no writer ran concurrently; the caller
// brackets the call with the ledger's sequence counter.
func (t *liveTable) mayContain(fp Fingerprint) bool {
	for i, n := uint64(fp)&t.mask, uint64(0); n <= t.mask; i, n = (i+1)&t.mask, n+1 {
		got := t.index[i].fingerprint.Load()
		if got == 0 {
			return false
		}
		if got == uint64(fp) {
			return true
		}
	}
	return false
}

// findLocked returns the entry index holding (tenant, id), or -1.
func (t *liveTable) findLocked(fp Fingerprint, tenant policy.TenantID, id string) int {
	for i, n := uint64(fp)&t.mask, uint64(0); n <= t.mask; i, n = (i+1)&t.mask, n+1 {
		s := &t.index[i]
		got := s.fingerprint.Load()
		if got == 0 {
			return -1
		}
		if got == uint64(fp) {
			e := &t.entries[s.entryIndex]
			if e.reservation.Tenant == tenant && e.id == id {
				return int(s.entryIndex)
			}
		}
	}
	return -1
}

// insertLocked stores a new live entry and returns its ticket. The caller
// guarantees the key is absent and a free entry exists (the node live
// limit is checked first and sizes the table).
func (t *liveTable) insertLocked(fp Fingerprint, id string, r Reservation) Ticket {
	top := len(t.free) - 1
	ei := t.free[top]
	t.free = t.free[:top]
	e := &t.entries[ei]
	e.generation++
	e.live = true
	e.executing = false
	e.fingerprint = fp
	e.id = id
	e.reservation = r
	i := uint64(fp) & t.mask
	for t.index[i].fingerprint.Load() != 0 {
		i = (i + 1) & t.mask
	}
	t.index[i].entryIndex = ei
	t.index[i].fingerprint.Store(uint64(fp))
	return Ticket{entry: ei, generation: e.generation}
}

// entryLocked returns the entry a ticket names if it is still live.
func (t *liveTable) entryLocked(tk Ticket) *entry {
	if int(tk.entry) >= len(t.entries) || tk.generation == 0 {
		return nil
	}
	e := &t.entries[tk.entry]
	if !e.live || e.generation != tk.generation {
		return nil
	}
	return e
}

// removeLocked frees a live entry and its index slot.
func (t *liveTable) removeLocked(ei uint32) {
	e := &t.entries[ei]
	fp := uint64(e.fingerprint)
	i := fp & t.mask
	for t.index[i].fingerprint.Load() != fp || t.index[i].entryIndex != ei {
		i = (i + 1) & t.mask
	}
	t.deleteIndexLocked(i)
	e.live = false
	e.executing = false
	e.id = ""
	e.reservation = Reservation{}
	t.free = append(t.free, ei)
}

// deleteIndexLocked empties index slot i and shifts later members of its
// probe run back, so that lookups never need tombstones.
func (t *liveTable) deleteIndexLocked(i uint64) {
	for {
		t.index[i].fingerprint.Store(0)
		j := i
		for {
			j = (j + 1) & t.mask
			fp := t.index[j].fingerprint.Load()
			if fp == 0 {
				return
			}
			home := fp & t.mask
			// j may fill the hole at i unless its home lies cyclically in
			// (i, j], where it is still reachable without i.
			if !cyclicallyBetween(home, i, j) {
				break
			}
		}
		t.index[i].entryIndex = t.index[j].entryIndex
		t.index[i].fingerprint.Store(t.index[j].fingerprint.Load())
		i = j
	}
}

// cyclicallyBetween reports whether x lies in the cyclic interval (lo, hi].
func cyclicallyBetween(x, lo, hi uint64) bool {
	if lo < hi {
		return lo < x && x <= hi
	}
	return lo < x || x <= hi
}

// liveCountLocked is the number of live entries.
func (t *liveTable) liveCountLocked() int { return len(t.entries) - len(t.free) }
