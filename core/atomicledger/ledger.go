package atomicledger

import (
	"runtime"
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

// numDimensions is how many dimensions a scope counts; an [amounts] is
// indexed by Dimension.
const numDimensions = 4

// amounts is one quantity per dimension, indexed by Dimension.
type amounts [numDimensions]uint64

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
// perhaps reused) no longer matches and can free nothing.
type Ticket struct {
	entry      uint32
	generation uint64
}

// Slot is the live-table entry the ticket names, in [0, the node live
// limit). No two live reservations share a slot; a slot is reused only
// after its reservation was released.
func (t Ticket) Slot() int { return int(t.entry) }

// Held is what a scope holds now: live, queued, fuel and memory.
type Held struct {
	Live        uint64
	Queued      uint64
	CPUFuel     uint64
	MemoryBytes uint64
}

func heldOf(a amounts) Held {
	return Held{Live: a[LiveActivations], Queued: a[QueuedReservations], CPUFuel: a[CPUFuel], MemoryBytes: a[MemoryBytes]}
}

// counters is a cell class's live backlog on a cache line of its own.
// Only the live half of slots is used (the packing is the same as it
// was for every scope, so a backlog reads as slots>>32).
type counters struct {
	slots atomic.Uint64
	_     [cacheLine - 8]byte
}

const oneLive uint64 = 1 << 32

func (c *counters) live() uint64 { return c.slots.Load() >> 32 }

// scope is one ledger scope: its limits, whether it is sharded, and its
// shared counters. An unsharded scope's counters are what its live
// reservations hold, moved with compare-and-swap from any stripe; a
// sharded scope's counters are its pool, the capacity that no stripe's
// room holds, moved only on the exact path (every stripe held). Either
// way a lock-free reader loads them; the counters sit a full line away
// from the limits and from the next scope.
type scope struct {
	kind    Scope
	sharded bool
	limit   amounts
	batch   amounts // how much a stripe's room is topped up by (sharded only)
	_       [cacheLine]byte
	count   [numDimensions]atomic.Uint64
	_       [cacheLine]byte
}

// Ledger is the node quota ledger. One per node; share it. It must not be
// copied after first use.
//
// Limits never change after [New]. Every transaction runs with one
// stripe's mutex held (see doc.go, "Concurrency"): a valid commit, a
// start and a release touch only their stripe, the live table's bucket
// of their key, the cell class's backlog and the counters of unsharded
// scopes. mu, with every stripe's mutex, is the exact path: decisions at
// or near a limit, and the moves that drain and refill the stripes'
// rooms and entry lists.
type Ledger struct {
	scopes     []scope // node, then tenants, trust classes and queue classes
	tenantBase int
	trustBase  int
	queueBase  int
	entryBatch uint64 // free entries a stripe's list is topped up by

	cell [policy.NumCellClasses]counters

	stripes   []stripe
	tokens    sync.Pool // *stripe; see acquire
	nextToken atomic.Uint32

	mu    sync.Mutex // the exact path: held with every stripe's mutex
	table liveTable  // entries and buckets: see table.go for what guards them

	// sequenced: every transaction runs on the exact path and takes the
	// next order there, and the pre-check decides nothing (see
	// NewSequenced). order is the last order handed out.
	sequenced bool
	order     atomic.Uint64
}

// maxStripes caps the stripes, and so the memory of the rooms (one per
// scope per stripe).
const maxStripes = 64

// shardMinimum is the smallest limit, per stripe, that a dimension of a
// sharded scope may have: below it a stripe's room would hold too little
// to save trips to the exact path, so the scope stays unsharded and its
// counters move by compare-and-swap.
const shardMinimum = 8

// New allocates a ledger for a compiled policy, with one stripe per
// GOMAXPROCS at the time of the call (at most 64). All memory the ledger
// will ever use is allocated here.
func New(c *policy.Compiled) *Ledger {
	return newLedger(c, min(max(runtime.GOMAXPROCS(0), 1), maxStripes), shardMinimum)
}

// NewSequenced allocates a ledger whose transactions have one total
// order that a recording can replay: every transaction runs on the exact
// path (mu and every stripe held) and draws the next order there
// ([Tx.Order]), so two transactions' orders are the order in which they
// took effect; and [Ledger.PreCheck] never answers, so every capacity
// decision is such a transaction. It gives up the stripes' scaling for
// that order: it is for recording a node's decisions, not for speed.
func NewSequenced(c *policy.Compiled) *Ledger {
	l := New(c)
	l.sequenced = true
	return l
}

// NextOrder draws the next order of a sequenced ledger, for an event that
// moves nothing in it (a decision made before the ledger, a load
// sample); it places the event after every transaction that drew an
// order before it. It is 0 on a ledger that is not sequenced.
func (l *Ledger) NextOrder() uint64 {
	if !l.sequenced {
		return 0
	}
	return l.order.Add(1)
}

// newLedger is New with a chosen number of stripes and the smallest
// per-stripe limit of a sharded dimension (tests shard small limits).
func newLedger(c *policy.Compiled, stripes int, minimum uint64) *Ledger {
	nt, nc, nq := c.NumTenants(), c.NumTrustClasses(), c.NumQueueClasses()
	l := &Ledger{
		scopes:     make([]scope, 1+nt+nc+nq),
		tenantBase: 1,
		trustBase:  1 + nt,
		queueBase:  1 + nt + nc,
		stripes:    make([]stripe, stripes),
		table:      newLiveTable(c.Node().Limits.MaxLiveActivations),
	}
	l.scopes[0].init(NodeScope, limitsOf(c.Node().Limits), stripes, minimum)
	for i := range nt {
		l.scopes[l.tenantBase+i].init(TenantScope, limitsOf(c.Tenant(policy.TenantID(i)).Limits), stripes, minimum)
	}
	for i := range nc {
		l.scopes[l.trustBase+i].init(TrustClassScope, limitsOf(c.TrustClass(policy.TrustClassID(i)).Limits), stripes, minimum)
	}
	for i := range nq {
		unlimited := ^uint64(0)
		queue := amounts{unlimited, c.QueueClass(policy.QueueClassID(i)).MaxQueued, unlimited, unlimited}
		l.scopes[l.queueBase+i].init(QueueClassScope, queue, stripes, minimum)
	}
	l.entryBatch = max(c.Node().Limits.MaxLiveActivations/(4*uint64(stripes)), 1)
	for i := range l.stripes {
		st := &l.stripes[i]
		st.room = newRooms(len(l.scopes))
		for id := range l.scopes {
			l.topUpLocked(st, id)
		}
		l.table.move(&st.free, &l.table.free, l.entryBatch)
	}
	l.tokens.New = func() any { return &l.stripes[int(l.nextToken.Add(1)-1)%len(l.stripes)] }
	return l
}

func limitsOf(lim policy.Limits) amounts {
	return amounts{lim.MaxLiveActivations, lim.MaxQueuedReservations, lim.MaxReservedCPUFuel, lim.MaxReservedMemoryBytes}
}

// init sets a scope's limits and decides whether it is sharded: every
// dimension it limits must allow minimum per stripe. A queue class
// limits only its queued dimension (the others are unlimited and never
// move).
func (sc *scope) init(kind Scope, limit amounts, stripes int, minimum uint64) {
	sc.kind, sc.limit = kind, limit
	sc.sharded = true
	for d, lim := range limit {
		if kind == QueueClassScope && Dimension(d) != QueuedReservations {
			continue
		}
		if lim/uint64(stripes) < minimum {
			sc.sharded = false
		}
	}
	if sc.sharded {
		for d, lim := range limit {
			sc.count[d].Store(lim)
			if kind != QueueClassScope || Dimension(d) == QueuedReservations {
				sc.batch[d] = max(lim/(4*uint64(stripes)), 1)
			}
		}
	}
}

// scopeIndexes are r's node, tenant, trust-class and queue-class scopes,
// in checking order.
func (l *Ledger) scopeIndexes(r *Reservation) [4]int {
	return [4]int{0, l.tenantBase + int(r.Tenant), l.trustBase + int(r.TrustClass), l.queueBase + int(r.QueueClass)}
}

// needAt is what r holds at the i-th of its scopes (scopeIndexes order):
// a queue class counts only the queued slot. queued is 1 for a queued
// reservation, 0 once it started.
func needAt(i int, r *Reservation, queued uint64) amounts {
	if i == 3 {
		return amounts{QueuedReservations: queued}
	}
	return amounts{1, queued, r.CPUFuel, r.MemoryBytes}
}

// fits reports whether used+need <= limit without overflowing.
func fits(used, need, limit uint64) bool {
	return need <= limit && used <= limit-need
}

// usedOf is what the reservations of scope id hold: exact on the exact
// path, which holds every stripe's room still.
func (l *Ledger) usedOf(id int) amounts {
	sc := &l.scopes[id]
	var u amounts
	for d := range u {
		u[d] = sc.count[d].Load()
	}
	if !sc.sharded {
		return u
	}
	for d := range u {
		free := u[d]
		for i := range l.stripes {
			free += l.stripes[i].room[id][d]
		}
		u[d] = sc.limit[d] - free
	}
	return u
}

// shortfall is the first scope and dimension of r without room; the
// exact path's answer.
func (l *Ledger) shortfall(r *Reservation) Shortfall {
	for i, id := range l.scopeIndexes(r) {
		sc := &l.scopes[id]
		need := needAt(i, r, 1)
		used := l.usedOf(id)
		for d := range need {
			if !fits(used[d], need[d], sc.limit[d]) {
				return Shortfall{Scope: sc.kind, Dimension: Dimension(d), Permanent: need[d] > sc.limit[d]}
			}
		}
	}
	return Shortfall{}
}

// preShortfall is shortfall from what a lock-free reader may load: an
// unsharded scope's counters, and a sharded scope's pool. A sharded
// scope whose pool alone holds the need certainly has room; one whose
// pool does not may still have room parked in some stripe's room, which
// only the exact path may count, so known is false.
func (l *Ledger) preShortfall(r *Reservation) (s Shortfall, known bool) {
	for i, id := range l.scopeIndexes(r) {
		sc := &l.scopes[id]
		need := needAt(i, r, 1)
		for d, n := range need {
			v := sc.count[d].Load()
			switch {
			case sc.sharded && v < n:
				return Shortfall{}, false
			case !sc.sharded && !fits(v, n, sc.limit[d]):
				return Shortfall{Scope: sc.kind, Dimension: Dimension(d), Permanent: n > sc.limit[d]}, true
			}
		}
	}
	return Shortfall{}, true
}

// PreCheck decides, without taking a mutex, whether r certainly does not
// fit. It returns exact=false when it cannot tell: a transaction was
// writing on some stripe, or the key (fingerprint fp) may already be
// live, in which case the duplicate answer comes first and only a
// transaction can give it. With exact=true, a Shortfall with a scope is
// the answer and an empty one means a transaction must decide.
//
// A shortfall at a sharded scope is never exact here (see preShortfall):
// it takes the exact path, which counts the stripes' rooms.
//
// A shortfall is trusted only between two readings of every stripe's
// sequence counter: a writer makes its stripe's counter odd while it
// moves anything a lock-free reader loads, and the counters only grow,
// so equal sums of even counters mean nothing moved in between and what
// was read held at one instant. A request that fits needs no such
// reading (a transaction decides it anyway), so a valid request does not
// read the lines that other cores' transactions write.
func (l *Ledger) PreCheck(fp Fingerprint, r *Reservation) (s Shortfall, exact bool) {
	if l.sequenced {
		return Shortfall{}, false
	}
	if s, known := l.preShortfall(r); known && s.Scope == NoScope {
		return Shortfall{}, !l.table.mayContain(fp)
	}
	before, ok := l.quiescent()
	if !ok || l.table.mayContain(fp) {
		return Shortfall{}, false
	}
	s, known := l.preShortfall(r)
	if after, ok := l.quiescent(); !known || !ok || after != before {
		return Shortfall{}, false
	}
	return s, true
}

// quiescent sums the stripes' sequence counters; ok is false if one is
// odd (a writer is moving counters there).
func (l *Ledger) quiescent() (sum uint64, ok bool) {
	for i := range l.stripes {
		v := l.stripes[i].seq.Load()
		if v&1 != 0 {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

// Node reads the node's usage under the exact path's locks: the stripes'
// rooms are counted only there.
func (l *Ledger) Node() Held { return l.scopeUsage(0) }

// Tenant reads a tenant's usage under the exact path's locks.
func (l *Ledger) Tenant(id policy.TenantID) Held { return l.scopeUsage(l.tenantBase + int(id)) }

// TrustClass reads a trust class's usage under the exact path's locks.
func (l *Ledger) TrustClass(id policy.TrustClassID) Held {
	return l.scopeUsage(l.trustBase + int(id))
}

// QueueClassQueued reads a queue class's queued count under the exact
// path's locks.
func (l *Ledger) QueueClassQueued(id policy.QueueClassID) uint64 {
	return l.scopeUsage(l.queueBase + int(id)).Queued
}

func (l *Ledger) scopeUsage(id int) Held {
	l.lockAll()
	defer l.unlockAll()
	return heldOf(l.usedOf(id))
}

// CellClassLive reads a cell class's live backlog under the exact path's
// locks (a fast commit raises it before it decides).
func (l *Ledger) CellClassLive(c policy.CellClass) uint64 {
	l.lockAll()
	defer l.unlockAll()
	return l.cell[c].live()
}

// LiveEntries counts live reservations in the table (takes the exact
// path's locks).
func (l *Ledger) LiveEntries() int {
	l.lockAll()
	defer l.unlockAll()
	free := l.table.free.n
	for i := range l.stripes {
		free += l.stripes[i].free.n
	}
	return len(l.table.entries) - int(free)
}

// lockAll takes the exact path's locks: mu, then every stripe in order.
// A reader holds them without touching the sequence counters, so a
// scrape never makes the pre-check inexact; a writer makes them odd
// when it first moves something (Tx.write).
func (l *Ledger) lockAll() {
	l.mu.Lock()
	for i := range l.stripes {
		l.stripes[i].mu.Lock()
	}
}

func (l *Ledger) unlockAll() {
	for i := len(l.stripes) - 1; i >= 0; i-- {
		l.stripes[i].mu.Unlock()
	}
	l.mu.Unlock()
}

// oddSequences makes st's sequence counter odd, or every stripe's on the
// exact path; evenSequences undoes it at the transaction's end.
func (l *Ledger) oddSequences(st *stripe, exact bool) {
	if !exact {
		st.seq.Add(1)
		return
	}
	for i := range l.stripes {
		l.stripes[i].seq.Add(1)
	}
}

// endExactLocked ends an exact transaction on st, before its locks go.
func (l *Ledger) endExactLocked(st *stripe) {
	if st.tx.written {
		l.oddSequences(st, true)
	}
	st.tx.active = false
}
