package core

import (
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// AdmissionController decides admission for one pinned catalog view over
// the provider's shared ledger. It is immutable and safe for concurrent
// use; it starts no goroutine, timer, file or socket.
type AdmissionController struct {
	provider *LocalQuotaProvider
	source   RevisionPolicySource
	load     NodeLoadSource
	clock    deadline.Clock
}

// WithPolicySource returns a controller that resolves revision policy
// through source and shares everything else, the ledger included.
func (c *AdmissionController) WithPolicySource(source RevisionPolicySource) *AdmissionController {
	n := *c
	n.source = source
	if isNilPointer(source) {
		n.source = nil
	}
	return &n
}

// Provider returns the provider whose ledger the controller uses.
func (c *AdmissionController) Provider() *LocalQuotaProvider { return c.provider }

// AdmitNow decides req at the current time. The clock is read once, after
// the request's own checks (steps 1 to 4, which no time can change) and
// before the policy work; the deadline is bound to that reading. Under
// the ledger mutex it is read again, monotonically, and the final
// decision uses the second reading. A request rejected by steps 1 to 4
// never pays for a clock read.
func (c *AdmissionController) AdmitNow(req *AdmissionRequest) (*AdmissionPermit, error) {
	if req == nil {
		panic("core: AdmitNow with a nil request")
	}
	var d decision
	if err := c.checkRequest(req, &d); err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	return c.admit(req, c.clock.Now(), true, &d)
}

// AdmitAt decides req as if now were the time of both clock readings. It
// is the trusted deterministic seam for replay and tests; never expose it
// to a caller.
func (c *AdmissionController) AdmitAt(req *AdmissionRequest, now time.Time) (*AdmissionPermit, error) {
	if req == nil {
		panic("core: AdmitAt with a nil request")
	}
	var d decision
	if err := c.checkRequest(req, &d); err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	return c.admit(req, now, false, &d)
}

// decision is what steps 1 to 12 establish for the commit.
type decision struct {
	reservation atomicledger.Reservation
	fingerprint atomicledger.Fingerprint
	rev         *policy.RevisionPolicy
	grant       policy.Budget
	deadline    time.Time
	admittedAt  time.Time // the first clock reading
	parallelism uint64
}

func (c *AdmissionController) admit(req *AdmissionRequest, now time.Time, live bool, d *decision) (*AdmissionPermit, error) {
	if err := c.decide(req, now, live, d); err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	p, err := c.commit(req, now, live, d)
	if err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	c.provider.metrics.admitted.Inc()
	return p, nil
}

// checkRequest runs decision-table steps 1 to 4: the request's own
// metadata, identifiers, principal and priority. They depend on no time.
func (c *AdmissionController) checkRequest(req *AdmissionRequest, d *decision) *rejection {
	pr := c.provider
	node := &pr.node
	if err := checkMetadata(req, node); err != nil {
		return err
	}
	if err := checkIdentifiers(req, node); err != nil {
		return err
	}
	// Step 3: authentication facts against the tenant allowlist.
	p := &req.Principal
	if p.Kind == policy.AnonymousPrincipal {
		return errPrincipalDenied
	}
	tenantID, ok := pr.policy.TenantID(p.Tenant)
	if !ok || p.Tenant != req.Revision.Tenant || !pr.policy.Authorized(tenantID, p.Kind, p.Subject) ||
		(p.Kind == policy.ServicePrincipal && p.Service == "") {
		return errPrincipalDenied
	}
	tenant := &pr.tenants[tenantID]
	// Step 4: priority.
	if req.Priority > node.MaximumPriority {
		return errNodePriority
	}
	if req.Priority > tenant.MaximumPriority {
		return errTenantPriority
	}
	d.reservation.Tenant = tenantID
	return nil
}

// decide runs decision-table steps 5 to 12 and the lock-free capacity
// pre-check. Nothing here takes the mutex or allocates.
func (c *AdmissionController) decide(req *AdmissionRequest, now time.Time, live bool, d *decision) *rejection {
	pr := c.provider
	node := &pr.node
	tenantID := d.reservation.Tenant
	tenant := &pr.tenants[tenantID]
	// Step 5: the pinned view verifies the whole tuple.
	if c.source == nil {
		return errRevisionMissing
	}
	rev, ok := c.source.RevisionPolicy(&req.Revision)
	if !ok || rev == nil {
		return errRevisionMissing
	}
	d.rev = rev
	// Step 6: execution requirements and placement.
	features, err := c.checkRequirements(rev)
	if err != nil {
		return err
	}
	// Step 7: trust class.
	trustID, ok := pr.policy.TrustClassID(rev.TrustClass)
	if !ok || !tenant.PermitsTrustClass(trustID) {
		return errTrustClass
	}
	// Step 8: the grant.
	d.grant = grantOf(&req.RequestedBudget, rev, &node.BudgetCeiling)
	switch {
	case d.grant.CPUFuel == 0:
		return errZeroFuel
	case d.grant.MemoryBytes == 0:
		return errZeroMemory
	case d.grant.WallTime.Value == 0:
		return errZeroWallTime
	}
	// Step 9: the smallest compatible, permitted cell class.
	cell, err := pr.selectCell(d.grant.MemoryBytes, rev.Threading, features, tenant.CellClasses, pr.trust[trustID].CellClasses)
	if err != nil {
		return err
	}
	// Step 10: payload.
	if req.PayloadBytes > node.MaximumPayloadBytes {
		return errNodePayload
	}
	if req.PayloadBytes > tenant.MaximumPayloadBytes {
		return errTenantPayload
	}
	// Step 11: the caller's deadline.
	if req.Deadline.Set && deadline.Expired(now, req.Deadline.Value) {
		return errDeadlineExceeded
	}
	// Step 12: node load.
	sample, ok := c.currentLoad()
	if live && ok && sample.ObservedAt.After(now) {
		// Published after this request's clock reading, not from the
		// future: the sampler observed it before we loaded it, so a
		// fresh monotonic reading is at or after it. Judging it against
		// the older reading would reject valid work for a race.
		if err := loadVerdict(sample, ok, deadline.Resample(c.clock, now), &node.Overload); err != nil {
			return err
		}
	} else if err := loadVerdict(sample, ok, now, &node.Overload); err != nil {
		return err
	}
	queue, _ := pr.policy.QueueClassFor(req.Priority)
	d.reservation = atomicledger.Reservation{
		Tenant: tenantID, TrustClass: trustID, QueueClass: queue, CellClass: cell,
		CPUFuel: d.grant.CPUFuel, MemoryBytes: d.grant.MemoryBytes,
	}
	d.parallelism = pr.cells[cell].Parallelism
	d.admittedAt = now
	d.deadline = deadline.Bind(now, d.grant.WallTime.Value, req.Deadline.Value, req.Deadline.Set)
	d.fingerprint = atomicledger.FingerprintOf(tenantID, req.ActivationID)
	if s, exact := pr.ledger.PreCheck(d.fingerprint, &d.reservation); exact && s.Scope != atomicledger.NoScope {
		return capacityError(s)
	}
	return nil
}

func (c *AdmissionController) currentLoad() (*LoadSample, bool) {
	if c.load == nil {
		return nil, false
	}
	return c.load.CurrentLoad()
}

// commit runs step 13 under the ledger mutex: the clock is resampled, the
// deadline and load are judged again, then duplicate, capacity and
// feasibility, and only then does any counter move.
func (c *AdmissionController) commit(req *AdmissionRequest, first time.Time, live bool, d *decision) (*AdmissionPermit, *rejection) {
	pr := c.provider
	l := pr.ledger
	l.Lock()
	now := first
	if live {
		now = deadline.Resample(c.clock, first)
	}
	if req.Deadline.Set && deadline.Expired(now, req.Deadline.Value) {
		l.Unlock()
		return nil, errDeadlineExceeded
	}
	sample, ok := c.currentLoad()
	if err := loadVerdict(sample, ok, now, &pr.node.Overload); err != nil {
		l.Unlock()
		return nil, err
	}
	r := &d.reservation
	if l.ContainsLocked(d.fingerprint, r.Tenant, req.ActivationID) {
		l.Unlock()
		return nil, errDuplicate
	}
	if s := l.ShortfallLocked(r); s.Scope != atomicledger.NoScope {
		l.Unlock()
		return nil, capacityError(s)
	}
	switch deadline.Check(d.deadline.Sub(now), l.CellBacklogLocked(r.CellClass), d.parallelism,
		sample.QueueDelay[r.CellClass], pr.estimate()) {
	case deadline.Infeasible:
		l.Unlock()
		return nil, errQueueInfeasible
	case deadline.InfeasibleAlways, deadline.Overflow:
		l.Unlock()
		return nil, errQueueInfeasibleNo
	}
	ticket := l.ReserveLocked(d.fingerprint, req.ActivationID, *r)
	l.Unlock()
	return c.newPermit(req, d, ticket), nil
}

func (p *LocalQuotaProvider) estimate() deadline.Estimate {
	return deadline.Estimate{
		EstimatedServiceTime: p.node.Deadline.EstimatedServiceTime,
		MinimumExecutionTime: p.node.Deadline.MinimumExecutionTime,
		SafetyMargin:         p.node.Deadline.SafetyMargin,
	}
}
