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

// entry is one live reservation, or a free one on a free list. Entries
// never move: a permit names its entry by index and generation.
//
// A live entry is guarded by the lock of its bucket (and, on the exact
// path, by every stripe); a free one by the mutex of the stripe whose
// list holds it (the table's own list: by the exact path). fingerprint
// and next are atomics because the pre-check walks chains lock-free.
type entry struct {
	fingerprint atomic.Uint64 // 0 while free
	next        atomic.Uint32 // the next entry of its chain or free list, as index+1; 0 ends it
	generation  uint64        // bumped on every reuse, so a stale ticket never matches
	live        bool
	executing   bool
	id          string
	reservation Reservation
}

// maxBucketLocks bounds the bucket locks: two transactions of different
// keys wait on each other only when their buckets share a lock.
const maxBucketLocks = 256

// liveTable is the fixed-capacity live-activation table: a pool of
// maxLive entries and a chained hash index from fingerprint to entry
// (at least two buckets per entry, so chains stay short). Bucket b is
// guarded by locks[b & lockMask]. Free entries sit on free lists linked
// through next: one per stripe and the table's own. Nothing in it grows
// after construction.
type liveTable struct {
	entries  []entry
	buckets  []atomic.Uint32 // head of each chain, as index+1; 0 is empty
	mask     uint64
	locks    []bucketLock
	lockMask uint64
	free     freeList // guarded by the exact path
}

// freeList is a list of free entries linked through their next field.
type freeList struct {
	head, tail uint32 // index+1; 0 when empty
	n          uint64
}

func newLiveTable(maxLive uint64) liveTable {
	size := uint64(2)
	if maxLive > 0 {
		size = 1 << bits.Len64(maxLive*2-1)
	}
	locks := min(size, maxBucketLocks)
	t := liveTable{
		entries:  make([]entry, maxLive),
		buckets:  make([]atomic.Uint32, size),
		mask:     size - 1,
		locks:    make([]bucketLock, locks),
		lockMask: locks - 1,
	}
	for i := maxLive; i > 0; i-- {
		t.push(&t.free, uint32(i-1))
	}
	return t
}

// lockOf is the index of the lock that guards fp's bucket.
func (t *liveTable) lockOf(fp Fingerprint) int32 {
	return int32(uint64(fp) & t.mask & t.lockMask)
}

// push puts free entry i at the head of list f.
func (t *liveTable) push(f *freeList, i uint32) {
	t.entries[i].next.Store(f.head)
	f.head = i + 1
	if f.tail == 0 {
		f.tail = i + 1
	}
	f.n++
}

// pop takes the entry at the head of list f.
func (t *liveTable) pop(f *freeList) (uint32, bool) {
	if f.head == 0 {
		return 0, false
	}
	i := f.head - 1
	f.head = t.entries[i].next.Load()
	if f.head == 0 {
		f.tail = 0
	}
	f.n--
	return i, true
}

// splice moves all of src to the front of dst.
func (t *liveTable) splice(dst, src *freeList) {
	if src.n == 0 {
		return
	}
	t.entries[src.tail-1].next.Store(dst.head)
	dst.head = src.head
	if dst.tail == 0 {
		dst.tail = src.tail
	}
	dst.n += src.n
	*src = freeList{}
}

// move moves up to n entries from src to dst.
func (t *liveTable) move(dst, src *freeList, n uint64) {
	for ; n > 0; n-- {
		i, ok := t.pop(src)
		if !ok {
			return
		}
		t.push(dst, i)
	}
}

// mayContain reports whether the key with fingerprint fp may be live. A
// false answer is exact only if no writer ran concurrently; the caller
// brackets the call with the stripes' sequence counters. The walk is
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

// findLocked returns the entry index holding (tenant, id), or -1. The
// caller holds the bucket of fp.
func (t *liveTable) findLocked(fp Fingerprint, tenant policy.TenantID, id string) int {
	for next := t.buckets[uint64(fp)&t.mask].Load(); next != 0; {
		e := &t.entries[next-1]
		if e.fingerprint.Load() == uint64(fp) && e.reservation.Tenant == tenant && e.id == id {
			return int(next - 1)
		}
		next = e.next.Load()
	}
	return -1
}

// insertLocked makes free entry ei the live reservation of (fp, id) and
// returns its ticket. The caller holds the bucket of fp and took ei off
// a free list. The entry is complete before the bucket points to it.
func (t *liveTable) insertLocked(ei uint32, fp Fingerprint, id string, r Reservation) Ticket {
	e := &t.entries[ei]
	e.generation++
	e.live = true
	e.executing = false
	e.id = id
	e.reservation = r
	b := &t.buckets[uint64(fp)&t.mask]
	e.next.Store(b.Load())
	e.fingerprint.Store(uint64(fp))
	b.Store(ei + 1)
	return Ticket{entry: ei, generation: e.generation}
}

// removeLocked unlinks live entry ei from its chain and clears it; the
// caller then puts it on a free list. The caller holds its bucket. A
// lock-free reader already on ei may still follow its old next.
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
	e.fingerprint.Store(0)
	e.live = false
	e.executing = false
	e.id = ""
	e.reservation = Reservation{}
}
