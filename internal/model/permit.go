package model

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Permit is a handle to one admission's reservation: an admission handle
// from Admit, or an execution handle from StartExecutionAt. An admission
// handle acts while the reservation is queued, an execution handle while
// it is executing; neither acts once it is released. The zero value is an
// inert handle.
type Permit struct {
	model       *Model
	clock       Clock
	key         string
	reservation *reservation
	execution   bool
	grant       grant
}

// grant is what a permit tells its holder; immutable after admission.
type grant struct {
	activationID string
	revision     policy.RevisionIdentity
	budget       policy.Budget
	deadline     time.Time
	admittedAt   time.Time // the reading the deadline was bound to
	obligations  core.Obligations
}

// liveLocked reports whether the handle may act: issued, not released,
// and in the state its kind acts in. The caller holds mu.
func (p *Permit) liveLocked() bool {
	r := p.reservation
	return !r.released && r.executing == p.execution
}

// EnsureSchedulableAt checks, changing nothing, that an admission handle
// is live and now is before its deadline.
func (p *Permit) EnsureSchedulableAt(now time.Time) error {
	if p == nil || p.model == nil || p.execution {
		return permitNotLive()
	}
	p.model.mu.Lock()
	defer p.model.mu.Unlock()
	if !p.liveLocked() {
		return permitNotLive()
	}
	if !now.Before(p.grant.deadline) {
		return permitDeadlineExceeded()
	}
	return nil
}

// StartExecution is StartExecutionAt at the controller's clock, read under
// the mutex and never earlier than the admission's reading.
func (p *Permit) StartExecution() (*Permit, error) {
	return p.start(func() time.Time {
		now := p.clock.Now()
		if now.Before(p.grant.admittedAt) {
			return p.grant.admittedAt
		}
		return now
	})
}

// StartExecutionAt consumes a live admission handle: at or after the
// deadline the reservation is released and the answer is deadline
// exceeded; otherwise the queued slots are returned and an execution
// handle holds the rest.
func (p *Permit) StartExecutionAt(now time.Time) (*Permit, error) {
	return p.start(func() time.Time { return now })
}

func (p *Permit) start(now func() time.Time) (*Permit, error) {
	if p == nil || p.model == nil || p.execution {
		return nil, permitNotLive()
	}
	m := p.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if !p.liveLocked() {
		return nil, permitNotLive()
	}
	if !now().Before(p.grant.deadline) {
		m.releaseLocked(p.key, p.reservation)
		return nil, permitDeadlineExceeded()
	}
	m.startLocked(p.reservation)
	e := *p
	e.execution = true
	return &e, nil
}

// Release returns everything the reservation still holds if the handle
// is live, and reports whether it did: an admission handle whose
// reservation started executing, a second release and the zero value
// return false.
func (p *Permit) Release() bool {
	if p == nil || p.model == nil {
		return false
	}
	m := p.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if !p.liveLocked() {
		return false
	}
	m.releaseLocked(p.key, p.reservation)
	return true
}

// Live reports whether the handle may still act.
func (p *Permit) Live() bool {
	if p == nil || p.model == nil {
		return false
	}
	p.model.mu.Lock()
	defer p.model.mu.Unlock()
	return p.liveLocked()
}

// IsExecution reports whether this is an execution handle.
func (p *Permit) IsExecution() bool { return p != nil && p.execution }

func (p *Permit) g() *grant {
	if p == nil {
		return &grant{}
	}
	return &p.grant
}

// Grant is what the permit was admitted for and its terms.
func (p *Permit) Grant() core.Grant {
	g := p.g()
	return core.Grant{ActivationID: g.activationID, Revision: g.revision, Budget: g.budget, Deadline: g.deadline,
		Obligations: g.obligations}
}
