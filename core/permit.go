package core

import (
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// Permit states. The zero state is a permit that was never issued. One
// object serves as both permits: StartExecution turns the queued state
// into the executing one and hands out the same memory as an
// *ExecutionPermit, so starting allocates nothing.
const (
	permitNeverIssued uint32 = iota
	permitQueued
	permitExecuting
	permitReleased
)

// RevisionIdentity is the verified identity tuple a permit was admitted
// for. The revision's untrusted attributes are not carried.
type RevisionIdentity struct {
	Tenant     string
	Service    string
	Route      string
	Contract   string
	Function   string
	Revision   string
	Release    string
	Generation uint64
}

// grant is everything a permit tells its holder; immutable after admission.
type grant struct {
	activationID string
	revision     RevisionIdentity
	budget       policy.Budget
	deadline     time.Time
	admittedAt   time.Time // the reading the deadline was bound to
	cell         policy.CellClass
	queueClass   string
	trustClass   string
	priority     uint32
	rev          *policy.RevisionPolicy
}

// AdmissionPermit is an admitted activation's queued reservation. Only a
// controller issues live ones; the zero value is inert. Exactly one owner
// holds it: the scheduler takes it with the work, and either consumes it
// with StartExecution or releases it (on enqueue failure, cancellation or
// expiry). A permit dropped without either is reclaimed when the garbage
// collector finds it unreachable and counted as leaked: an operator
// alarm, not a substitute for Release.
//
// An AdmissionPermit must not be copied after first use.
type AdmissionPermit struct {
	noCopy noCopy

	ledger  *atomicledger.Ledger
	clock   deadline.Clock
	metrics *metrics
	ticket  atomicledger.Ticket
	grant   grant

	// state changes only under the ledger mutex and is read lock-free.
	state atomic.Uint32
}

// ExecutionPermit is a started activation's reservation (live slot, fuel,
// memory, cell backlog; no queued slot). The goroutine that owns execution
// retains it until the guest has stopped, accounting is final and the cell
// is released or quarantined, then releases it. The zero value is inert.
//
// An ExecutionPermit must not be copied after first use.
type ExecutionPermit AdmissionPermit

// reclaimLeaked is the permit's finalizer: it returns the reservation of
// a permit that became unreachable while still holding one. A finalizer
// (rather than runtime.AddCleanup, which allocates a closure per call)
// keeps admission at a single allocation; the permit holds no pointer to
// itself, so nothing keeps an abandoned one reachable.
func reclaimLeaked(p *AdmissionPermit) {
	if p.ledger.Release(p.ticket) {
		p.metrics.leaked.Inc()
	}
}

func (c *AdmissionController) newPermit(req *AdmissionRequest, d *decision, ticket atomicledger.Ticket) *AdmissionPermit {
	pr := c.provider
	r := &req.Revision
	p := &AdmissionPermit{
		ledger:  pr.ledger,
		clock:   c.clock,
		metrics: pr.metrics,
		ticket:  ticket,
		grant: grant{
			activationID: req.ActivationID,
			revision: RevisionIdentity{Tenant: r.Tenant, Service: r.Service, Route: r.Route, Contract: r.Contract,
				Function: r.Function, Revision: r.Revision, Release: r.Release, Generation: r.Generation},
			budget:     d.grant,
			deadline:   d.deadline,
			admittedAt: d.admittedAt,
			cell:       d.reservation.CellClass,
			queueClass: pr.queues[d.reservation.QueueClass].Name,
			trustClass: pr.trust[d.reservation.TrustClass].Name,
			priority:   req.Priority,
			rev:        d.rev,
		},
	}
	p.state.Store(permitQueued)
	runtime.SetFinalizer(p, reclaimLeaked)
	return p
}

// EnsureSchedulableAt checks, without changing anything, that the permit
// is live and now is before its deadline. The scheduler calls it (with
// the live clock) immediately before allocating a cell.
func (p *AdmissionPermit) EnsureSchedulableAt(now time.Time) error {
	if p == nil || p.state.Load() != permitQueued {
		return errPermitNotLive
	}
	if !now.Before(p.grant.deadline) {
		return errPermitDeadline
	}
	return nil
}

// StartExecution consumes the permit once a cell lease is held: the clock
// is resampled under the ledger mutex, and if the deadline has passed the
// permit is released and an error returned (the caller must also release
// or quarantine its lease). On success only the queued slots are returned,
// and the returned execution permit holds the rest.
func (p *AdmissionPermit) StartExecution() (*ExecutionPermit, error) {
	if p == nil || p.state.Load() == permitNeverIssued {
		return nil, errPermitNotLive
	}
	e, err := p.start(time.Time{}, true)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// StartExecutionAt is StartExecution at a trusted deterministic time, for
// replay and tests; never a caller-supplied timestamp.
func (p *AdmissionPermit) StartExecutionAt(now time.Time) (*ExecutionPermit, error) {
	if p == nil || p.state.Load() == permitNeverIssued {
		return nil, errPermitNotLive
	}
	e, err := p.start(now, false)
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (p *AdmissionPermit) start(now time.Time, live bool) (*ExecutionPermit, *Error) {
	l := p.ledger
	l.Lock()
	defer l.Unlock()
	if p.state.Load() != permitQueued {
		return nil, errPermitNotLive
	}
	if live {
		// Elapsed monotonic time since admission: half the cost of a
		// second wall-clock read, and immune to wall-clock steps.
		now = deadline.Resample(p.clock, p.grant.admittedAt)
	}
	if !now.Before(p.grant.deadline) {
		l.ReleaseLocked(p.ticket)
		p.state.Store(permitReleased)
		runtime.SetFinalizer(p, nil)
		return nil, errPermitDeadline
	}
	if !l.StartLocked(p.ticket) {
		p.state.Store(permitReleased)
		return nil, errPermitNotLive
	}
	p.state.Store(permitExecuting)
	return (*ExecutionPermit)(p), nil
}

// release returns the reservation if the permit is in state from.
func (p *AdmissionPermit) release(from uint32) bool {
	if p == nil || p.state.Load() != from {
		return false
	}
	l := p.ledger
	l.Lock()
	if p.state.Load() != from {
		l.Unlock()
		return false
	}
	p.state.Store(permitReleased)
	released := l.ReleaseLocked(p.ticket)
	l.Unlock()
	// A released permit has nothing left to reclaim; dropping its
	// finalizer spares the collector a finalization pass and lets the
	// permit be freed in the first cycle that finds it unreachable.
	runtime.SetFinalizer(p, nil)
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
func (p *AdmissionPermit) Live() bool { return p != nil && p.state.Load() == permitQueued }

// Live reports whether the execution permit still holds its reservation.
func (e *ExecutionPermit) Live() bool { return e != nil && e.state.Load() == permitExecuting }

// Accessors. They read immutable data and work in every state; the zero
// value answers zero values.

func (p *AdmissionPermit) g() *grant {
	if p == nil {
		return &grant{}
	}
	return &p.grant
}

func (e *ExecutionPermit) g() *grant { return (*AdmissionPermit)(e).g() }

// ActivationID is the admitted activation's ID.
func (p *AdmissionPermit) ActivationID() string { return p.g().activationID }

// Tenant is the admitted tenant.
func (p *AdmissionPermit) Tenant() string { return p.g().revision.Tenant }

// Revision is the verified revision identity.
func (p *AdmissionPermit) Revision() RevisionIdentity { return p.g().revision }

// EffectiveBudget is the grant: per dimension the minimum of request,
// capsule, deployment and node ceilings; its wall time is always set.
func (p *AdmissionPermit) EffectiveBudget() policy.Budget { return p.g().budget }

// Deadline is the effective deadline, bound once at admission.
func (p *AdmissionPermit) Deadline() time.Time { return p.g().deadline }

// Obligations are what downstream must enforce. They copy the feature
// list; CellClass and QueueClass read without allocating.
func (p *AdmissionPermit) Obligations() Obligations { return p.g().obligations() }

// CellClass is the selected cell class.
func (p *AdmissionPermit) CellClass() policy.CellClass { return p.g().cell }

// QueueClass is the selected queue class's name.
func (p *AdmissionPermit) QueueClass() string { return p.g().queueClass }

// ActivationID is the admitted activation's ID.
func (e *ExecutionPermit) ActivationID() string { return e.g().activationID }

// Tenant is the admitted tenant.
func (e *ExecutionPermit) Tenant() string { return e.g().revision.Tenant }

// Revision is the verified revision identity.
func (e *ExecutionPermit) Revision() RevisionIdentity { return e.g().revision }

// EffectiveBudget is the grant the runner initializes accounting from.
func (e *ExecutionPermit) EffectiveBudget() policy.Budget { return e.g().budget }

// Deadline is the effective deadline bound at admission; never reset.
func (e *ExecutionPermit) Deadline() time.Time { return e.g().deadline }

// Obligations are what the runner must enforce.
func (e *ExecutionPermit) Obligations() Obligations { return e.g().obligations() }

// Obligations are the typed, immutable terms of a permit: the exact
// classes selected and the revision's execution requirements.
type Obligations struct {
	CellClass      policy.CellClass
	QueueClass     string
	TrustClass     string
	Priority       uint32
	Backend        string
	Threading      policy.Threading
	StateModel     string
	Features       []string
	CallDepthLimit uint32
}

func (g *grant) obligations() Obligations {
	o := Obligations{CellClass: g.cell, QueueClass: g.queueClass, TrustClass: g.trustClass, Priority: g.priority}
	if g.rev != nil {
		o.Backend = g.rev.Backend
		o.Threading = g.rev.Threading
		o.StateModel = g.rev.StateModel
		o.Features = slices.Clone(g.rev.Features)
		o.CallDepthLimit = g.rev.CallDepthLimit
	}
	return o
}
