package atomicledger

import (
	"sync"
	"sync/atomic"

	"latent.dev/admission/policy"
)

// cacheLine is the padding unit; 64 bytes covers x86-64 and most arm64.
const cacheLine = 64

// Scope names a ledger scope in a [Shortfall].
type Scope uint8

// The scopes, in the order capacity is checked.
const (
	NoScope Scope = iota
	NodeScope
	TenantScope
	TrustClassScope
	QueueClassScope
)

// Dimension names a counted quantity in a [Shortfall].
type Dimension uint8

// The dimensions, in the order capacity is checked within a scope.
const (
	LiveActivations Dimension = iota
	QueuedReservations
	CPUFuel
	MemoryBytes
)

// Shortfall is why a reservation does not fit: the first scope and
// dimension (in checking order) without room. Permanent is set when the
// reservation could not fit that scope even if it were empty.
type Shortfall struct {
	Scope     Scope
	Dimension Dimension
	Permanent bool
}

// Reservation is what one admission holds: 1 live and 1 queued slot plus
// the granted fuel and memory at node, tenant and trust class; 1 queued at
// the queue class; 1 live at the cell class.
type Reservation struct {
	Tenant      policy.TenantID
	TrustClass  policy.TrustClassID
	QueueClass  policy.QueueClassID
	CellClass   policy.CellClass
	CPUFuel     uint64
	MemoryBytes uint64
}

// Ticket names one live reservation: its entry in the live table and the
// entry's generation at insert. A ticket whose entry was released (and
// perhaps reused) no longer matches and can free nothing, and neither
// can one built outside the package: its generation is 0, which no
// entry has.
type Ticket struct {
	// Slot is the live-table entry the ticket names, in [0, the node
	// live limit). No two live reservations share a slot; a slot is
	// reused only after its reservation was released, so a holder may
	// index its own table of live reservations by it (core's young
	// permits do).
	Slot       uint32
	generation uint32 // never 0 in a ticket Reserve made
}

// Held is what a scope holds now: live, queued, fuel and memory.
type Held struct {
	Live        uint64
	Queued      uint64
	CPUFuel     uint64
	MemoryBytes uint64
}

// counters is one scope's counters and limits on a cache line of its
// own. The counters are written only by a transaction, with Ledger.mu
// held, and read lock-free; the limits never change after [New].
//
// slots packs the live count (high 32 bits) and the queued count (low 32
// bits) into one word, so a reservation moves both with one atomic add
// and a reader loads a consistent pair. Neither can reach 2^32: both are
// bounded by the live table, which policy.MaxNodeLiveActivations (2^20)
// sizes, and queued never exceeds live, so the low half never borrows
// from the high one. A queue class uses only the queued half and its
// queued limit.
type counters struct {
	slots  atomic.Uint64
	fuel   atomic.Uint64
	memory atomic.Uint64
	limit  policy.Limits
	_      [cacheLine - 56]byte
}

// Packed slot deltas; subtracting d is adding -d, which wraps.
const (
	oneLive   uint64 = 1 << 32
	oneQueued uint64 = 1
	halfMask  uint64 = 1<<32 - 1
)

func (c *counters) live() uint64   { return c.slots.Load() >> 32 }
func (c *counters) queued() uint64 { return c.slots.Load() & halfMask }

func (c *counters) held() Held {
	v := c.slots.Load()
	return Held{Live: v >> 32, Queued: v & halfMask, CPUFuel: c.fuel.Load(), MemoryBytes: c.memory.Load()}
}

// Ledger is the node quota ledger. One per node; share it. It must not be
// copied after first use.
//
// Limits never change after [New]. One mutex, mu, serializes every
// transaction (a commit, a start, a release, a reclaim); the counters are
// atomics so that reads and the lock-free pre-check never take it. seq is
// odd while a Reserve, a Start or a Release moves counters and the live
// table, so that the pre-check can tell whether anything moved while it
// read (see PreCheck).
type Ledger struct {
	// Every scope's counters sit in allocations that hold no pointer, so
	// the allocator puts them on line boundaries (an object with pointers
	// this large starts after a header word) and no two scopes share a
	// line.
	tenant []counters
	trust  []counters
	queue  []counters // only queued is used
	node   *counters

	_   [cacheLine]byte
	seq atomic.Uint64 // written by Reserve, Start and Release, with mu held; read lock-free
	_   [cacheLine - 8]byte

	mu sync.Mutex
	// order is the last place in the ledger's total order handed out:
	// every transaction and every [Ledger.NextOrder] takes the next one.
	// Guarded by mu.
	order uint64
	// inTx is true while Update runs its function. Guarded by mu.
	inTx bool
	// reserved counts the reservations ever made. Guarded by mu.
	reserved uint64
	// cellLive is each cell class's live backlog (queued plus
	// executing), which only a transaction judges (the deadline's
	// feasibility) and operators read under the mutex: plain counts,
	// not atomics. Guarded by mu.
	cellLive [policy.NumCellClasses]uint64
	// table is the live-activation table. Guarded by mu; its
	// fingerprints and chains are also read lock-free (table.go).
	table liveTable
}

// New allocates a ledger for a compiled policy. All memory the ledger will
// ever use is allocated here.
func New(c *policy.Compiled) *Ledger {
	l := &Ledger{
		node:   new(counters),
		tenant: make([]counters, c.NumTenants()),
		trust:  make([]counters, c.NumTrustClasses()),
		queue:  make([]counters, c.NumQueueClasses()),
		table:  newLiveTable(c.Node().Limits.MaxLiveActivations),
	}
	l.node.limit = c.Node().Limits
	for i := range l.tenant {
		l.tenant[i].limit = c.Tenant(policy.TenantID(i)).Limits
	}
	for i := range l.trust {
		l.trust[i].limit = c.TrustClass(policy.TrustClassID(i)).Limits
	}
	for i := range l.queue {
		l.queue[i].limit.MaxQueuedReservations = c.QueueClass(policy.QueueClassID(i)).MaxQueued
	}
	return l
}

// Room is what [Ledger.PreCheck] saw when a reservation fitted: the
// sequence counter it read. A transaction that finds the counter
// unchanged knows that no counter moved since, so the reservation still
// fits ([Tx.Assess]). The zero Room saw nothing.
type Room struct{ seq uint64 }

// PreCheck decides, without taking the mutex, whether r certainly does
// not fit. With exact=true, a Shortfall with a scope is the answer, the
// one a transaction would have given at an instant during the call; an
// empty Shortfall means a transaction must decide, and room says what
// the pre-check saw. exact is false when it cannot tell: a write moved
// the counters meanwhile, or the key (fingerprint fp) may already be
// live, in which case the duplicate answer comes first and only a
// transaction can give it.
//
// Every write (a Reserve, a Start, a Release) keeps seq odd while it
// moves the scopes one after another. The pre-check trusts what it read
// only when seq was even before and unchanged after: then no scope moved
// in between, and what it read is one whole state, the one at the
// instant of its last read, where the rejection linearizes. The key is
// looked up in that window too, so it was absent at that instant (a
// removal never hides another key; an insert is a Reserve).
//
// A request that fits reads seq and the counters once and nothing else:
// the transaction decides it anyway.
func (l *Ledger) PreCheck(fp Fingerprint, r *Reservation) (s Shortfall, exact bool, room Room) {
	before := l.seq.Load()
	if s = l.shortfall(r); s.Scope == NoScope {
		if before&1 == 0 {
			room = Room{seq: before | 1<<63}
		}
		return s, true, room
	}
	if before&1 != 0 || l.table.mayContain(fp) || l.seq.Load() != before {
		return Shortfall{}, false, Room{}
	}
	return s, true, Room{}
}

// TenantLiveSince reads the live count of r's tenant for a caller that
// judges one more limit of that tenant lock-free, after [Ledger.PreCheck]
// found r fitting with room (a fleet slice: core checks it after the
// tenant scope). ok is true only when the key (fingerprint fp) was absent
// and no counter moved since the pre-check's room was taken, so that at
// the instant of the read every scope PreCheck read had the room it saw,
// the key was not live, and the tenant held live: a rejection judged on
// live is the one a transaction would have given then. With the zero Room, or a fingerprint that may be live, ok is
// false and a transaction must decide.
func (l *Ledger) TenantLiveSince(room Room, fp Fingerprint, r *Reservation) (live uint64, ok bool) {
	if room.seq == 0 || l.table.mayContain(fp) {
		return 0, false
	}
	live = l.tenant[r.Tenant].live()
	if l.seq.Load()|1<<63 != room.seq {
		return 0, false
	}
	return live, true
}

// NextOrder takes the next place in the ledger's total order for an
// event that moves nothing in it (a decision made before the ledger, a
// load sample, a catalog change): after every transaction that took its
// order before, before every one that takes it after.
func (l *Ledger) NextOrder() uint64 {
	l.mu.Lock()
	l.order++
	o := l.order
	l.mu.Unlock()
	return o
}

// Exclude runs fn with the mutex held and no transaction open, taking
// no place in the total order: for a write outside the ledger that a
// transaction reads and that lock-free readers judge beside the ledger
// (core's fleet slices). A transaction that reads such a value and then
// reserves sees no write between the two, so a lock-free reader that
// finds the key absent and no write since its room also finds the
// value every later transaction reads. fn must not block or call back
// into the ledger.
func (l *Ledger) Exclude(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

// Tx is the ledger with its mutex held: the only value on which the
// operations that need the mutex exist. Only [Ledger.Begin] (and
// [Ledger.Update], through it) hands one out, and it is valid only until
// its [Tx.End]; using it after that is a bug in the caller and panics.
type Tx struct{ l *Ledger }

// Begin takes the mutex and the next place in the total order
// ([Tx.Order]) and returns the transaction; [Tx.End] ends it and
// releases the mutex. Hold it only for the final checks and one commit:
// nothing between the two may block, and what can run before Begin
// should. Defer End where anything between them can panic.
func (l *Ledger) Begin() Tx {
	l.mu.Lock()
	l.order++
	l.inTx = true
	return Tx{l}
}

// End ends the transaction and releases the mutex. The Tx is then
// spent: using it again is a bug in the caller and panics.
func (tx Tx) End() {
	l := tx.held()
	l.inTx = false
	l.mu.Unlock()
}

// Update runs fn in one transaction: [Ledger.Begin], fn, and
// [Tx.End] on every path.
func (l *Ledger) Update(fn func(tx Tx)) {
	tx := l.Begin()
	defer tx.End()
	fn(tx)
}

// held returns the ledger, or panics if the transaction has ended.
func (tx Tx) held() *Ledger {
	if tx.l == nil || !tx.l.inTx {
		panic("atomicledger: a Tx used outside its Update")
	}
	return tx.l
}

// Order is the transaction's place in the ledger's total order: two
// transactions' orders are the order in which they took effect.
func (tx Tx) Order() uint64 { return tx.held().order }

// Contains reports whether (tenant, id) holds a live reservation.
func (tx Tx) Contains(fp Fingerprint, tenant policy.TenantID, id string) bool {
	return tx.held().table.findLocked(fp, tenant, id) >= 0
}

// Shortfall is the first scope and dimension where r does not fit, or a
// Shortfall with NoScope. It reads what PreCheck reads; with the mutex
// held nothing moves underneath.
func (tx Tx) Shortfall(r *Reservation) Shortfall { return tx.held().shortfall(r) }

// Assessment is what a commit judges of a reservation before it reserves
// it, read in one step of its transaction: whether the key is live, the
// first scope without room, and the backlog of the reservation's cell
// class (live reservations, queued plus executing).
type Assessment struct {
	Duplicate   bool
	Shortfall   Shortfall
	CellBacklog uint64
}

// Assess reads what a commit judges of r for key (fp, r.Tenant, id): what
// [Tx.Contains], [Tx.Shortfall] and [Tx.CellBacklog] answer, in one call,
// so that the commit's transaction holds the mutex for one read and the
// Reserve. The shortfall is not read again for an r that
// [Ledger.PreCheck] found fitting with room when no counter moved since:
// r still fits. The caller judges the
// three in its own order (core: the duplicate, then capacity, then
// feasibility).
func (tx Tx) Assess(room Room, fp Fingerprint, id string, r *Reservation) Assessment {
	l := tx.held()
	a := Assessment{
		Duplicate:   l.table.findLocked(fp, r.Tenant, id) >= 0,
		CellBacklog: l.cellLive[r.CellClass],
	}
	if room.seq != l.seq.Load()|1<<63 {
		a.Shortfall = l.shortfall(r)
	}
	return a
}

func (l *Ledger) shortfall(r *Reservation) Shortfall {
	if s, ok := scopeShortfall(NodeScope, l.node, r); !ok {
		return s
	}
	if s, ok := scopeShortfall(TenantScope, &l.tenant[r.Tenant], r); !ok {
		return s
	}
	if s, ok := scopeShortfall(TrustClassScope, &l.trust[r.TrustClass], r); !ok {
		return s
	}
	q := &l.queue[r.QueueClass]
	if limit := q.limit.MaxQueuedReservations; !fits(q.queued(), 1, limit) {
		return Shortfall{Scope: QueueClassScope, Dimension: QueuedReservations, Permanent: limit < 1}
	}
	return Shortfall{}
}

func scopeShortfall(scope Scope, c *counters, r *Reservation) (Shortfall, bool) {
	v := c.slots.Load()
	lim := &c.limit
	switch {
	case !fits(v>>32, 1, lim.MaxLiveActivations):
		return Shortfall{scope, LiveActivations, lim.MaxLiveActivations < 1}, false
	case !fits(v&halfMask, 1, lim.MaxQueuedReservations):
		return Shortfall{scope, QueuedReservations, lim.MaxQueuedReservations < 1}, false
	case !fits(c.fuel.Load(), r.CPUFuel, lim.MaxReservedCPUFuel):
		return Shortfall{scope, CPUFuel, r.CPUFuel > lim.MaxReservedCPUFuel}, false
	case !fits(c.memory.Load(), r.MemoryBytes, lim.MaxReservedMemoryBytes):
		return Shortfall{scope, MemoryBytes, r.MemoryBytes > lim.MaxReservedMemoryBytes}, false
	}
	return Shortfall{}, true
}

// fits reports whether used+need <= limit without overflowing.
func fits(used, need, limit uint64) bool {
	return need <= limit && used <= limit-need
}

// TenantLive is tenant id's live reservations (queued plus executing):
// with the mutex held, exact.
func (tx Tx) TenantLive(id policy.TenantID) uint64 { return tx.held().tenant[id].live() }

// CellBacklog is the number of live reservations (queued plus
// executing) of cell class c.
func (tx Tx) CellBacklog(c policy.CellClass) uint64 { return tx.held().cellLive[c] }

// Reserve commits r for key (fp, id). The caller has checked, in this
// transaction, that the key is absent and that Shortfall found room
// (Reserve does not check again); every counter moves only after all
// checks passed.
func (tx Tx) Reserve(fp Fingerprint, id string, r Reservation) Ticket {
	l := tx.held()
	l.reserved++
	l.seq.Add(1)
	tk := l.table.insertLocked(fp, id, &r)
	add(l.node, &r)
	add(&l.tenant[r.Tenant], &r)
	add(&l.trust[r.TrustClass], &r)
	l.queue[r.QueueClass].slots.Add(oneQueued)
	l.cellLive[r.CellClass]++
	l.seq.Add(1)
	return tk
}

// add counts one new queued reservation: a live and a queued slot, its
// fuel and its memory.
func add(c *counters, r *Reservation) {
	c.slots.Add(oneLive + oneQueued)
	c.fuel.Add(r.CPUFuel)
	c.memory.Add(r.MemoryBytes)
}

// sub returns a reservation: its memory, fuel, then its live slot and
// queued (the packed queued slots it still holds: one, or none once
// started).
func sub(c *counters, r *Reservation, queued uint64) {
	c.memory.Add(-r.MemoryBytes)
	c.fuel.Add(-r.CPUFuel)
	c.slots.Add(-(oneLive + queued))
}

// Start moves a queued reservation to executing: it returns the queued
// slots at node, tenant, trust class and queue class and keeps the rest.
// It reports false if tk is not live or already executing.
func (tx Tx) Start(tk Ticket) bool {
	l := tx.held()
	e := l.table.entryLocked(tk)
	if e == nil || e.executing {
		return false
	}
	e.executing = true
	r := &e.reservation
	l.seq.Add(1) // odd while the scopes move: see Release
	l.queue[r.QueueClass].slots.Add(^oneQueued + 1)
	l.trust[r.TrustClass].slots.Add(^oneQueued + 1)
	l.tenant[r.Tenant].slots.Add(^oneQueued + 1)
	l.node.slots.Add(^oneQueued + 1)
	l.seq.Add(1)
	return true
}

// Release returns everything tk still holds, whatever was consumed. It
// reports false, and changes nothing, when tk no longer names a live
// reservation.
func (tx Tx) Release(tk Ticket) bool {
	l := tx.held()
	e := l.table.entryLocked(tk)
	if e == nil {
		return false
	}
	r := e.reservation
	queued := oneQueued
	if e.executing {
		queued = 0
	}
	// The sequence counter is odd while the scopes move, one after
	// another, so that no lock-free pre-check trusts what it reads of a
	// state half-way through. Giving capacity back in the reverse of the
	// checking order keeps each pre-check's own reads consistent, but
	// not two pre-checks with each other: one that saw the tenant's slot
	// back (the release done) and a later one that saw the node's not
	// yet (the release not begun) admit no single instant for it, and
	// the fleet's porcupine check caught such a pair.
	l.seq.Add(1)
	if queued != 0 {
		l.queue[r.QueueClass].slots.Add(-queued)
	}
	sub(&l.trust[r.TrustClass], &r, queued)
	sub(&l.tenant[r.Tenant], &r, queued)
	sub(l.node, &r, queued)
	l.cellLive[r.CellClass]--
	l.table.removeLocked(tk.Slot)
	l.seq.Add(1)
	return true
}

// Node reads the node's counters lock-free.
func (l *Ledger) Node() Held { return l.node.held() }

// Tenant reads a tenant's counters lock-free.
func (l *Ledger) Tenant(id policy.TenantID) Held { return l.tenant[id].held() }

// TrustClass reads a trust class's counters lock-free.
func (l *Ledger) TrustClass(id policy.TrustClassID) Held { return l.trust[id].held() }

// QueueClassQueued reads a queue class's queued count lock-free.
func (l *Ledger) QueueClassQueued(id policy.QueueClassID) uint64 { return l.queue[id].queued() }

// CellClassLive reads a cell class's live backlog. It takes the mutex:
// the count is a plain one that only transactions move.
func (l *Ledger) CellClassLive(c policy.CellClass) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cellLive[c]
}

// Reserved is how many reservations were ever made (takes the mutex).
func (l *Ledger) Reserved() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reserved
}

// LiveEntries counts live reservations in the table (takes the mutex).
func (l *Ledger) LiveEntries() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.table.liveCountLocked()
}
