package atomicledger

import (
	"sync"
	"sync/atomic"

	"latent.dev/admission/policy"
)

// stripe is one shard of the ledger: its own mutex, its sequence counter,
// its rooms (the capacity of each sharded scope it may hand out without
// asking anyone) and its list of free live-table entries. A transaction
// holds one stripe's mutex; the exact path holds them all. Fields after
// mu are guarded by it; seq and the rooms are also read lock-free.
type stripe struct {
	_  [cacheLine]byte
	mu sync.Mutex
	// seq is odd while a transaction on this stripe moves counters, its
	// rooms or the live table: see Ledger.PreCheck.
	seq    atomic.Uint64
	room   []room   // by scope index; only sharded scopes' are used
	free   freeList // free live-table entries this stripe hands out
	serial uint64   // counts the transactions, so that a kept Tx is caught
	tx     txState
	_      [cacheLine]byte
}

// bucketLock is one of the live table's bucket locks, on a line of its own.
type bucketLock struct {
	mu sync.Mutex
	_  [cacheLine - 8]byte
}

// room is a stripe's allotment of one sharded scope, per dimension:
// capacity it may hand out without asking anyone. Only a transaction
// holding the stripe reads or writes it (the exact path holds them all),
// so it is a plain value: no lock-free reader ever sums the rooms.
type room = amounts

// newRooms allocates n rooms with a line of padding either side, so no
// other allocation shares their first or last line.
func newRooms(n int) []room {
	pad := cacheLine / int(unsafeSizeofRoom)
	return make([]room, n+2*pad)[pad : pad+n]
}

const unsafeSizeofRoom = numDimensions * 8

// txState is what the running transaction of a stripe holds. Guarded by
// the stripe's mu.
type txState struct {
	serial  uint64
	order   uint64 // on a sequenced ledger, the transaction's order
	active  bool
	exact   bool  // the exact path: mu and every stripe are held
	bucket  int32 // the bucket lock held, or -1
	written bool  // the stripe's seq was made odd

	// On the fast path, Shortfall claims the reservation's capacity and
	// a free entry before it answers that there is room, and CellBacklog
	// raises the backlog it reads; Reserve keeps them, and the end of
	// the transaction gives back whatever Reserve did not keep.
	claimed   bool
	claim     Reservation
	entry     uint32
	cellHeld  bool
	cellClass policy.CellClass
	reserved  bool

	// escalate: the fast path gave an answer only the exact path can
	// give (no room in the stripe or at an unsharded scope, a second key,
	// a backlog that was only an upper bound and refused). The
	// transaction's function is then run again on the exact path.
	escalate bool
	bounded  bool
	// moved: a Start or Release changed something, which a second run
	// could not take back; a transaction that moved something and then
	// needs the exact path is a misuse (two keys, or a decision after a
	// move) and panics.
	moved bool
}

// acquire picks a stripe for a transaction. A sync.Pool keeps one stripe
// per P in its private slot, so that the goroutines of one core keep
// drawing the stripe whose lines that core already holds; when the pool
// is empty (at first, and after a collection empties it) New hands the
// stripes out in turn. Two cores that draw the same stripe only wait on
// its mutex: which stripe a transaction uses never changes an answer.
// With one stripe there is nothing to choose.
func (l *Ledger) acquire() *stripe {
	if len(l.stripes) == 1 {
		return &l.stripes[0]
	}
	return l.tokens.Get().(*stripe)
}

// giveBack returns a stripe that acquire handed out.
func (l *Ledger) giveBack(st *stripe) {
	if len(l.stripes) > 1 {
		l.tokens.Put(st)
	}
}

// Tx is a running transaction: the only value on which the operations
// that decide or move counters exist. Only [Ledger.Update] hands one out,
// and it is valid only until the function it was given returns; using it
// after that is a bug in the caller and panics.
type Tx struct {
	l      *Ledger
	st     *stripe
	serial uint64
}

// Update runs fn in a transaction and ends it when fn returns, on every
// path. Hold it only for the final checks and one commit: fn must not
// block.
//
// fn first runs on the fast path, with one stripe held. If it got an
// answer there that only the exact path may give (Shortfall found no
// room in the stripe's rooms or at an unsharded scope; CellBacklog gave
// an upper bound and fn then reserved nothing; a second key), everything
// it claimed is given back and fn runs once more, on the exact path,
// with mu and every stripe held. So fn must have no effect but its Tx
// calls and the results it writes, which the second run overwrites;
// functions that only call Start and Release never run twice.
func (l *Ledger) Update(fn func(tx Tx)) {
	st := l.acquire()
	l.updateOn(st, fn)
	l.giveBack(st)
}

// updateOn is Update on stripe st.
func (l *Ledger) updateOn(st *stripe, fn func(tx Tx)) {
	if l.sequenced || !l.updateFast(st, fn) {
		l.updateExact(st, fn)
	}
}

func (l *Ledger) updateFast(st *stripe, fn func(tx Tx)) (done bool) {
	st.mu.Lock()
	st.serial++
	st.tx = txState{serial: st.serial, active: true, bucket: -1}
	defer func() {
		var misuse bool
		done, misuse = l.endFastLocked(st)
		st.mu.Unlock()
		if misuse {
			panic("atomicledger: a Tx that committed, started or released went on to a second key or decision")
		}
	}()
	fn(Tx{l, st, st.serial})
	return true
}

func (l *Ledger) updateExact(st *stripe, fn func(tx Tx)) {
	l.lockAll()
	defer l.unlockAll()
	st.serial++
	st.tx = txState{serial: st.serial, active: true, exact: true, bucket: -1}
	if l.sequenced {
		st.tx.order = l.order.Add(1)
	}
	defer l.endExactLocked(st)
	fn(Tx{l, st, st.serial})
}

// endFastLocked ends a fast transaction: it gives back what was claimed
// and not reserved, unlocks the bucket and evens the sequence counter.
// It reports done=false when the transaction must run on the exact
// path, and misuse when it must but cannot (see txState.moved).
func (l *Ledger) endFastLocked(st *stripe) (done, misuse bool) {
	tx := &st.tx
	if tx.claimed {
		l.giveClaimLocked(st, &tx.claim)
		l.table.push(&st.free, tx.entry)
	}
	if tx.cellHeld {
		l.cell[tx.cellClass].slots.Add(^oneLive + 1)
	}
	if tx.bucket >= 0 {
		l.table.locks[tx.bucket].mu.Unlock()
	}
	if tx.written {
		st.seq.Add(1)
	}
	tx.active = false
	again := tx.escalate || (tx.bounded && !tx.reserved)
	return !again, again && (tx.moved || tx.reserved)
}

// Order is the transaction's place in a sequenced ledger's total order
// (see [NewSequenced]), and 0 on any other ledger.
func (tx Tx) Order() uint64 { return tx.held().order }

// held returns the transaction's state, or panics if it has ended.
func (tx Tx) held() *txState {
	if tx.st == nil || !tx.st.tx.active || tx.st.tx.serial != tx.serial {
		panic("atomicledger: a Tx used outside its Update")
	}
	return &tx.st.tx
}

// write makes the stripe's sequence counter odd (on the exact path,
// every stripe's), once per transaction, before the first thing a
// lock-free reader could see moves.
func (tx Tx) write(s *txState) {
	if !s.written {
		s.written = true
		tx.l.oddSequences(tx.st, s.exact)
	}
}

// lockBucket takes the bucket lock of fp on the fast path. A
// transaction holds one key's bucket; asking for a second sends it to
// the exact path (ok is false), where no bucket lock is needed. With one
// stripe every transaction holds it, so none needs a bucket lock.
func (tx Tx) lockBucket(s *txState, fp Fingerprint) (ok bool) {
	if s.exact || len(tx.l.stripes) == 1 {
		return true
	}
	b := tx.l.table.lockOf(fp)
	switch s.bucket {
	case b:
		return true
	case -1:
		tx.l.table.locks[b].mu.Lock()
		s.bucket = b
		return true
	}
	s.escalate = true
	return false
}

// Contains reports whether (tenant, id) holds a live reservation. On the
// fast path the key's bucket stays locked until the transaction ends, so
// the answer holds through a Reserve of the same key.
func (tx Tx) Contains(fp Fingerprint, tenant policy.TenantID, id string) bool {
	s := tx.held()
	if !tx.lockBucket(s, fp) {
		return false
	}
	return tx.l.table.findLocked(fp, tenant, id) >= 0
}

// Shortfall is the first scope and dimension where r does not fit, or a
// Shortfall with NoScope. On the exact path it is exact. On the fast
// path a NoScope answer has already claimed r's capacity (from the
// stripe's rooms and, by compare-and-swap, at unsharded scopes) and a
// free entry, and is exact; any other answer is provisional, and the
// transaction runs again on the exact path.
func (tx Tx) Shortfall(r *Reservation) Shortfall {
	s := tx.held()
	l := tx.l
	if s.exact {
		return l.shortfall(r)
	}
	if s.claimed {
		if s.claim == *r {
			return Shortfall{}
		}
		l.giveClaimLocked(tx.st, &s.claim)
		l.table.push(&tx.st.free, s.entry)
		s.claimed = false
	}
	tx.write(s)
	short, ok := l.takeClaimLocked(tx.st, r)
	if !ok {
		s.escalate = true
		return short
	}
	entry, ok := l.table.pop(&tx.st.free)
	if !ok {
		l.giveClaimLocked(tx.st, r)
		s.escalate = true
		return Shortfall{Scope: NodeScope, Dimension: LiveActivations}
	}
	s.claimed, s.claim, s.entry = true, *r, entry
	return Shortfall{}
}

// CellBacklog is the number of live reservations (queued plus
// executing) of cell class c: exact on the exact path. On the fast path
// it raises the backlog by one first and answers the count before its
// own, an upper bound of n at that instant (it counts other fast
// transactions' raises that may yet be given back); a transaction that
// then reserves nothing runs again on the exact path, so a refusal never
// rests on the bound.
func (tx Tx) CellBacklog(c policy.CellClass) uint64 {
	s := tx.held()
	cell := &tx.l.cell[c]
	if s.exact {
		return cell.live()
	}
	s.bounded = true
	if s.cellHeld && s.cellClass == c {
		return cell.live() - 1
	}
	if s.cellHeld {
		tx.l.cell[s.cellClass].slots.Add(^oneLive + 1)
	}
	tx.write(s)
	s.cellHeld, s.cellClass = true, c
	return cell.slots.Add(oneLive)>>32 - 1
}

// Reserve commits r for key (fp, id). The caller has checked that the
// key is absent and Shortfall found room. On the fast path the capacity
// Shortfall claimed becomes the reservation's (Reserve claims it itself
// if Shortfall was not asked, and sends the transaction to the exact
// path if there is none: the Ticket it then returns is the zero one, and
// the second run's is the real one).
func (tx Tx) Reserve(fp Fingerprint, id string, r Reservation) Ticket {
	s := tx.held()
	l := tx.l
	if s.exact {
		tx.write(s)
		return l.reserveExact(tx.st, fp, id, &r)
	}
	if !tx.lockBucket(s, fp) {
		return Ticket{}
	}
	if tx.Shortfall(&r).Scope != NoScope {
		return Ticket{}
	}
	if !s.cellHeld || s.cellClass != r.CellClass {
		tx.CellBacklog(r.CellClass)
	}
	s.claimed, s.cellHeld, s.reserved = false, false, true
	return l.table.insertLocked(s.entry, fp, id, r)
}

// reserveExact is Reserve on the exact path: it takes r's capacity from
// the pools (draining the stripes' rooms into them when a pool alone is
// short), then tops up st's rooms and entry list for the fast path.
func (l *Ledger) reserveExact(st *stripe, fp Fingerprint, id string, r *Reservation) Ticket {
	for i, id := range l.scopeIndexes(r) {
		sc := &l.scopes[id]
		need := needAt(i, r, 1)
		if !sc.sharded {
			for d, n := range need {
				if n != 0 {
					sc.count[d].Add(n)
				}
			}
			continue
		}
		for d, n := range need {
			if sc.count[d].Load() < n {
				l.drainLocked(id)
				break
			}
		}
		for d, n := range need {
			pool := sc.count[d].Load()
			if pool < n {
				panic("atomicledger: Reserve of a reservation that does not fit")
			}
			sc.count[d].Store(pool - n)
		}
		l.topUpLocked(st, id)
	}
	if st.free.n == 0 && l.table.free.n == 0 {
		for i := range l.stripes {
			l.table.splice(&l.table.free, &l.stripes[i].free)
		}
	}
	entry, ok := l.table.pop(&st.free)
	if !ok {
		if entry, ok = l.table.pop(&l.table.free); !ok {
			panic("atomicledger: Reserve of a reservation that does not fit")
		}
	}
	l.table.move(&st.free, &l.table.free, l.entryBatch)
	l.cell[r.CellClass].slots.Add(oneLive)
	return l.table.insertLocked(entry, fp, id, *r)
}

// drainLocked moves every stripe's room of scope id back into its pool.
// The exact path holds every stripe.
func (l *Ledger) drainLocked(id int) {
	sc := &l.scopes[id]
	for i := range l.stripes {
		rm := &l.stripes[i].room[id]
		for d, v := range rm {
			if v != 0 {
				rm[d] = 0
				sc.count[d].Add(v)
			}
		}
	}
}

// topUpLocked moves up to a batch of sharded scope id's pool into st's
// room, per dimension. The exact path holds every stripe (or New has the
// ledger to itself).
func (l *Ledger) topUpLocked(st *stripe, id int) {
	sc := &l.scopes[id]
	if !sc.sharded {
		return
	}
	for d, b := range sc.batch {
		if m := min(b, sc.count[d].Load()); m != 0 {
			sc.count[d].Add(-m)
			st.room[id][d] += m
		}
	}
}

// takeClaimLocked claims r's capacity on the fast path, scope by scope:
// from st's room at a sharded scope, by compare-and-swap at an unsharded
// one. On the first scope without room it gives back what it took and
// reports that scope and dimension.
func (l *Ledger) takeClaimLocked(st *stripe, r *Reservation) (Shortfall, bool) {
	ids := l.scopeIndexes(r)
	for i, id := range ids {
		need := needAt(i, r, 1)
		if d, ok := l.take(st, id, &need); !ok {
			for j := i - 1; j >= 0; j-- {
				back := needAt(j, r, 1)
				l.give(st, ids[j], &back)
			}
			sc := &l.scopes[id]
			return Shortfall{Scope: sc.kind, Dimension: d, Permanent: need[d] > sc.limit[d]}, false
		}
	}
	return Shortfall{}, true
}

// giveClaimLocked gives back a claim that was not reserved.
func (l *Ledger) giveClaimLocked(st *stripe, r *Reservation) {
	for i, id := range l.scopeIndexes(r) {
		back := needAt(i, r, 1)
		l.give(st, id, &back)
	}
}

// take claims need at scope id for a transaction on st.
func (l *Ledger) take(st *stripe, id int, need *amounts) (Dimension, bool) {
	sc := &l.scopes[id]
	if sc.sharded {
		rm := &st.room[id]
		for d, n := range need {
			if rm[d] < n {
				return Dimension(d), false
			}
		}
		for d, n := range need {
			rm[d] -= n
		}
		return 0, true
	}
	for d, n := range need {
		if !casAdd(&sc.count[d], n, sc.limit[d]) {
			for e := d - 1; e >= 0; e-- {
				sc.count[e].Add(-need[e])
			}
			return Dimension(d), false
		}
	}
	return 0, true
}

// casAdd adds n to c if the sum stays within limit.
func casAdd(c *atomic.Uint64, n, limit uint64) bool {
	if n == 0 {
		return fits(c.Load(), 0, limit)
	}
	for {
		v := c.Load()
		if !fits(v, n, limit) {
			return false
		}
		if c.CompareAndSwap(v, v+n) {
			return true
		}
	}
}

// give returns amounts at scope id: into st's room at a sharded scope,
// straight off the counters at an unsharded one. A return needs no
// decision, so it never leaves the fast path.
func (l *Ledger) give(st *stripe, id int, back *amounts) {
	sc := &l.scopes[id]
	if sc.sharded {
		rm := &st.room[id]
		for d, n := range back {
			rm[d] += n
		}
		return
	}
	for d, n := range back {
		if n != 0 {
			sc.count[d].Add(-n)
		}
	}
}

// entryOf returns the live entry tk names, holding its bucket on the
// fast path, or nil.
func (tx Tx) entryOf(s *txState, tk Ticket) *entry {
	t := &tx.l.table
	if tk.generation == 0 || int(tk.entry) >= len(t.entries) {
		return nil
	}
	e := &t.entries[tk.entry]
	fp := Fingerprint(e.fingerprint.Load())
	if fp == 0 || !tx.lockBucket(s, fp) {
		return nil
	}
	// Under the bucket's lock an entry still carrying fp is live in
	// that bucket and nothing else may change it.
	if Fingerprint(e.fingerprint.Load()) != fp || !e.live || e.generation != tk.generation {
		return nil
	}
	return e
}

// Start moves a queued reservation to executing: it returns the queued
// slots at node, tenant, trust class and queue class and keeps the rest.
// It reports false if tk is not live or already executing. A return
// needs no decision: it moves the stripe's rooms and the unsharded
// counters, never the pools.
func (tx Tx) Start(tk Ticket) bool {
	s := tx.held()
	e := tx.entryOf(s, tk)
	if e == nil || e.executing {
		return false
	}
	tx.write(s)
	s.moved = true
	e.executing = true
	r := &e.reservation
	back := amounts{QueuedReservations: 1}
	for _, id := range tx.l.scopeIndexes(r) {
		tx.l.give(tx.st, id, &back)
	}
	return true
}

// Release returns everything tk still holds. It reports false, and
// changes nothing, when tk no longer names a live reservation. The cell
// class's backlog drops last, so that a commit reading it never counts
// less than the reservations live at its linearization point.
func (tx Tx) Release(tk Ticket) bool {
	s := tx.held()
	e := tx.entryOf(s, tk)
	if e == nil {
		return false
	}
	tx.write(s)
	s.moved = true
	r := e.reservation
	var queued uint64 = 1
	if e.executing {
		queued = 0
	}
	for i, id := range tx.l.scopeIndexes(&r) {
		back := needAt(i, &r, queued)
		tx.l.give(tx.st, id, &back)
	}
	tx.l.table.removeLocked(tk.entry)
	tx.l.table.push(&tx.st.free, tk.entry)
	tx.l.cell[r.CellClass].slots.Add(^oneLive + 1)
	return true
}
