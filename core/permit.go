package core

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// Permit phases. StartExecution turns the queued phase into the executing
// one. A new block is queued: its zeroed phase needs no store.
const (
	permitQueued uint32 = iota
	permitExecuting
	permitReleased
)

// Grant is everything a permit tells its holder: what was admitted, the
// effective budget and deadline, and the obligations downstream must
// enforce. It is a value: a holder's copy changes nothing the permit or
// anyone else sees.
type Grant struct {
	ActivationID string
	Revision     policy.RevisionIdentity // verified; Revision.Tenant is the admitted tenant
	// Budget is the effective budget: per dimension the minimum of
	// request, capsule, deployment and node ceilings. Its wall time is
	// always set: the effective deadline minus the admission time, so a
	// caller deadline earlier than the granted wall time shortens it, and
	// runner accounting starts from it.
	Budget policy.Budget
	// Deadline is the effective deadline, bound once at admission to the
	// monotonic clock and never reset.
	Deadline    time.Time
	Obligations Obligations
}

// Obligations are the typed terms downstream must enforce: the exact
// classes selected and the revision's execution requirements.
type Obligations struct {
	CellClass      policy.CellClass
	QueueClass     string
	TrustClass     string
	Priority       uint32
	Backend        string
	Threading      policy.Threading
	StateModel     string
	Features       Features
	CallDepthLimit uint32
}

// Features is an immutable list of feature names. Reading it allocates
// nothing; [Features.Names] copies it.
type Features struct{ names []string }

// NewFeatures returns a list holding a copy of names.
func NewFeatures(names ...string) Features { return Features{slices.Clone(names)} }

// Len is the number of features.
func (f Features) Len() int { return len(f.names) }

// At is the i-th feature.
func (f Features) At(i int) string { return f.names[i] }

// Contains reports whether name is listed.
func (f Features) Contains(name string) bool { return slices.Contains(f.names, name) }

// Names returns a copy of the list.
func (f Features) Names() []string { return slices.Clone(f.names) }

// AdmissionPermit is an admitted activation's queued reservation. Only a
// controller issues live ones; the zero value is inert. Exactly one owner
// holds it: the scheduler takes it with the work, and either consumes it
// with StartExecution or releases it (on enqueue failure, cancellation or
// expiry). A permit dropped without either is reclaimed when the garbage
// collector finds it unreachable and counted as leaked: an operator
// alarm, not a substitute for Release.
//
// An AdmissionPermit must not be copied after first use. A copy, or a
// live permit overwritten with another value (its zero value included),
// is inert; the reservation it stood for is still reclaimed once the
// original permit becomes unreachable.
type AdmissionPermit struct {
	noCopy noCopy

	// self is the permit's own address while it is the head of the block
	// a controller allocated; in a zero value, a copy or an overwritten
	// permit it differs from the permit's address, and the permit is
	// inert. A uintptr, so the block holds no pointer to itself and an
	// abandoned one stays collectable.
	self uintptr
}

// ExecutionPermit is a started activation's reservation (live slot, fuel,
// memory, cell backlog; no queued slot). The goroutine that owns execution
// retains it until the guest has stopped, accounting is final and the cell
// is released or quarantined, then releases it. The zero value is inert.
//
// An ExecutionPermit must not be copied after first use.
type ExecutionPermit AdmissionPermit

// permitBlock is the one allocation behind a live permit: the permit a
// caller holds, then its state, which only this package can reach. One
// object serves as both permits: StartExecution hands out the same
// memory as an *ExecutionPermit, so starting allocates nothing.
type permitBlock struct {
	permit AdmissionPermit // first: its address is the block's
	state  permitState
}

// permitState is what a live permit holds: its reservation and what its
// Grant is rebuilt from. The strings and the revision policy it points to
// are immutable, so a permit copies no name, list or settings of its own;
// that keeps the one allocation of an admission small (112 bytes). Its
// pointers come first, so the collector scans only the block's first 40
// bytes.
type permitState struct {
	ctl *AdmissionController // its provider (ledger, counters, class names), clock and base
	// identity is the record's identity when the source keeps records,
	// else a copy of the request's made at admission.
	identity     *policy.RevisionIdentity
	rev          *policy.RevisionPolicy // from the pinned view; never changes
	activationID string

	ticket atomicledger.Ticket
	order  uint64 // the admitting commit's order on a recording provider
	// admitted is the reading the deadline was bound to, as its offset
	// from ctl's base (a time.Time would take 24 bytes and a pointer).
	admitted     time.Duration
	wall         time.Duration // effective: the deadline is ctl.base + admitted + wall
	fuel, memory uint64
	priority     uint32
	// phase changes only inside ledger transactions (so with the ledger's
	// mutex held) and is read lock-free.
	phase atomic.Uint32
	queue policy.QueueClassID
	// trust is the trust class's ID, which policy.MaxTrustClasses (64)
	// keeps below 256: one byte keeps the block in the 112-byte class.
	trust uint8
	cell  policy.CellClass
}

// provider is the provider whose ledger holds the permit's reservation.
func (s *permitState) provider() *LocalQuotaProvider { return s.ctl.provider }

// deadline is the effective deadline.
func (s *permitState) deadline() time.Time { return s.ctl.base.Add(s.admitted + s.wall) }

// elapsed is the monotonic time since admission on the controller's
// clock, never negative. On the system clock it is read directly, as the
// decision's own readings are (firstReading): one call fewer than through
// the Clock interface.
func (s *permitState) elapsed() time.Duration {
	var since time.Duration
	if s.ctl.system {
		since = time.Since(s.ctl.base)
	} else {
		since = s.ctl.clock.Since(s.ctl.base)
	}
	return max(since-s.admitted, 0)
}

// Why this file uses unsafe (as metrics.go does for its stripe, saying
// why):
// a permit must be inert when zeroed, copied or overwritten, yet the
// reservation of a permit its holder dropped or overwrote must still be
// reclaimed. Every safe form breaks one of the two:
//   - a pointer field from the permit to its state travels with a copy,
//     so the copy would be live;
//   - a pointer field from the block to itself (to recognise the
//     original) keeps the block reachable from itself, and the runtime
//     never runs the finalizer of an object in such a cycle;
//   - a permit that is a handle into a table (an index and a
//     generation) needs a table the collector cannot see through, so a
//     dropped permit could never be found unreachable.
// So the permit is the head of its block and holds its own address as a
// number (self): only the original, at that address, matches it, and
// the block stays collectable. state() converts the permit's address to
// the block's; it is the same address, as the permit is the block's
// first field.

// state returns the permit's state, or nil for an inert permit.
func (p *AdmissionPermit) state() *permitState {
	if p == nil || p.self != uintptr(unsafe.Pointer(p)) {
		return nil
	}
	return &(*permitBlock)(unsafe.Pointer(p)).state
}

// reclaimLeaked is the block's finalizer, set by the young table's sweep
// (reclaim.go) on a permit that outlived a collection: it returns the
// reservation of a permit that became unreachable while still holding
// one. It reads the block's state, not the permit's fields, so a permit
// its holder overwrote is reclaimed like any other. A finalizer (rather
// than runtime.AddCleanup, which allocates a box for its argument per
// call) adds no allocation.
func reclaimLeaked(p *AdmissionPermit) {
	s := &(*permitBlock)(unsafe.Pointer(p)).state
	pr := s.provider()
	released, order := false, uint64(0)
	pr.ledger.Update(func(tx atomicledger.Tx) { released, order = tx.Release(s.ticket), pr.orderOf(tx) })
	if released {
		pr.metrics.inc(leakedCounter)
		if pr.journal != nil {
			s.journalMove(moveReclaimed, order, s.elapsed())
		}
	}
}

func (c *AdmissionController) newPermit(req *AdmissionRequest, d *decision, ticket atomicledger.Ticket, order uint64) *AdmissionPermit {
	pr := c.provider
	identity := d.identity
	if identity == nil {
		// A plain source has no record to point to: the permit keeps a
		// copy, a second allocation that only such sources pay.
		identity = new(policy.RevisionIdentity)
		*identity = req.Revision.RevisionIdentity
	}
	b := &permitBlock{state: permitState{
		admitted:     c.firstOffset(d),
		ctl:          c,
		identity:     identity,
		rev:          d.rev,
		activationID: req.ActivationID,
		ticket:       ticket,
		order:        order,
		wall:         d.wall,
		fuel:         d.grant.CPUFuel,
		memory:       d.grant.MemoryBytes,
		priority:     req.Priority,
		queue:        d.reservation.QueueClass,
		trust:        uint8(d.reservation.TrustClass),
		cell:         d.reservation.CellClass,
	}}
	p := &b.permit
	p.self = uintptr(unsafe.Pointer(p))
	pr.young.hold(ticket, b)
	return p
}

// EnsureSchedulableAt checks, without changing anything, that the permit
// is live and now is before its deadline. The scheduler calls it (with
// the live clock) immediately before allocating a cell.
func (p *AdmissionPermit) EnsureSchedulableAt(now time.Time) error {
	s := p.state()
	if s == nil || s.phase.Load() != permitQueued {
		return ErrPermitNotLive
	}
	if !now.Before(s.deadline()) {
		return ErrPermitDeadlineExceeded
	}
	return nil
}

// StartExecution consumes the permit once a cell lease is held: the clock
// is resampled inside its ledger transaction (as elapsed monotonic time since
// admission), and if the deadline has passed the permit is released and
// an error returned (the caller must also release or quarantine its
// lease). On success only the queued slots are returned, and the
// returned execution permit holds the rest.
func (p *AdmissionPermit) StartExecution() (*ExecutionPermit, error) {
	s := p.state()
	if s == nil || s.phase.Load() != permitQueued {
		return nil, ErrPermitNotLive
	}
	var err error
	var order uint64
	var elapsed time.Duration
	pr := s.provider()
	elapsed, order, err = s.startTx(pr)
	if pr.journal != nil {
		switch {
		case err == nil:
			s.journalMove(moveStarted, order, elapsed)
		case err == ErrPermitDeadlineExceeded:
			s.journalMove(moveStartRefused, order, elapsed)
		}
	}
	if err != nil {
		// A permit released here stays in the young table (or keeps the
		// finalizer a sweep gave it): the sweep finds it released, or the
		// finalizer finds the ticket stale, and neither returns anything.
		return nil, err
	}
	return (*ExecutionPermit)(p), nil
}

// startTx runs startLocked in one ledger transaction and returns its
// order. The transaction ends on every path: startLocked reads the
// embedder's clock.
func (s *permitState) startTx(pr *LocalQuotaProvider) (time.Duration, uint64, error) {
	tx := pr.ledger.Begin()
	defer tx.End()
	elapsed, err := s.startLocked(tx)
	return elapsed, pr.orderOf(tx), err
}

// startLocked is StartExecution inside its ledger transaction.
func (s *permitState) startLocked(tx atomicledger.Tx) (time.Duration, error) {
	// The ledger's mutex serializes this with a racing release: of the
	// two, exactly one finds the permit queued.
	if s.phase.Load() != permitQueued {
		return 0, ErrPermitNotLive
	}
	s.phase.Store(permitExecuting)
	// Elapsed monotonic time since admission: half the cost of a second
	// wall-clock read, and immune to wall-clock steps.
	elapsed := s.elapsed()
	if elapsed >= s.wall {
		tx.Release(s.ticket)
		s.phase.Store(permitReleased)
		return elapsed, ErrPermitDeadlineExceeded
	}
	if !tx.Start(s.ticket) {
		s.phase.Store(permitReleased)
		return elapsed, ErrPermitNotLive
	}
	return elapsed, nil
}

// release returns the reservation if the permit is in state from.
func (p *AdmissionPermit) release(from uint32) bool {
	s := p.state()
	if s == nil || s.phase.Load() != from {
		return false
	}
	changed, released := false, false
	var order uint64
	pr := s.provider()
	// Only the ledger runs inside this transaction: nothing can panic.
	tx := pr.ledger.Begin()
	if s.phase.Load() == from {
		s.phase.Store(permitReleased)
		changed, released, order = true, tx.Release(s.ticket), pr.orderOf(tx)
	}
	tx.End()
	if released && pr.journal != nil {
		s.journalMove(moveReleased, order, s.elapsed())
	}
	if changed && !pr.young.forget(s.ticket, (*permitBlock)(unsafe.Pointer(p))) {
		// A sweep took the permit out of the young table first and may
		// have given it a finalizer. A released permit has nothing left to
		// reclaim; dropping the finalizer spares the collector a
		// finalization pass and lets the permit be freed in the first
		// cycle that finds it unreachable.
		runtime.SetFinalizer(p, nil)
	}
	return released
}

// Release returns the queued reservation. It is idempotent and reports
// whether it returned anything: false for a second release, a consumed
// permit (its execution permit holds the reservation now) or the zero
// value.
func (p *AdmissionPermit) Release() bool { return p.release(permitQueued) }

// Release returns everything the execution still holds, whatever was
// consumed. It is idempotent and reports whether it returned anything.
func (e *ExecutionPermit) Release() bool { return (*AdmissionPermit)(e).release(permitExecuting) }

// Live reports whether the permit still holds its queued reservation.
func (p *AdmissionPermit) Live() bool {
	s := p.state()
	return s != nil && s.phase.Load() == permitQueued
}

// Live reports whether the execution permit still holds its reservation.
func (e *ExecutionPermit) Live() bool {
	s := (*AdmissionPermit)(e).state()
	return s != nil && s.phase.Load() == permitExecuting
}

// Grant is what the permit was admitted for and its terms. It reads
// immutable data, allocates nothing and works in every state; an inert
// permit answers the zero Grant.
func (p *AdmissionPermit) Grant() Grant {
	s := p.state()
	if s == nil {
		return Grant{}
	}
	pr := s.provider()
	return Grant{
		ActivationID: s.activationID,
		Revision:     *s.identity,
		// The effective budget: the grant, with the wall time the
		// effective deadline leaves (a caller deadline earlier than now
		// plus the granted wall time shortens it).
		Budget:   policy.Budget{CPUFuel: s.fuel, MemoryBytes: s.memory, WallTime: policy.Optional[time.Duration]{Value: s.wall, Set: true}},
		Deadline: s.deadline(),
		Obligations: Obligations{
			CellClass:  s.cell,
			QueueClass: pr.queues[s.queue].Name,
			TrustClass: pr.trust[s.trust].Name,
			Priority:   s.priority,
			Backend:    s.rev.Backend,
			Threading:  s.rev.Threading,
			StateModel: s.rev.StateModel,
			// The catalog's policy never changes after compilation, and
			// Features gives no way to change it: sharing is safe.
			Features:       Features{s.rev.Features},
			CallDepthLimit: s.rev.CallDepthLimit,
		},
	}
}

// Grant is what the execution permit was admitted for and its terms: the
// runner initializes accounting from its budget and enforces its
// obligations.
func (e *ExecutionPermit) Grant() Grant { return (*AdmissionPermit)(e).Grant() }
