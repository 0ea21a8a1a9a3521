package model

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Clock is the time source of the live path (deadline.Clock satisfies it).
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Controller decides admission for one revision policy source over its
// model's ledger. It is immutable and safe for concurrent use.
type Controller struct {
	model  *Model
	source core.RevisionPolicySource
	load   core.NodeLoadSource
	clock  Clock
}

// WithPolicySource returns a controller that resolves revision policy
// through source and shares everything else, the ledger included.
func (c *Controller) WithPolicySource(source core.RevisionPolicySource) *Controller {
	n := *c
	n.source = source
	return &n
}

// Model returns the model whose ledger the controller uses.
func (c *Controller) Model() *Model { return c.model }

// Admit decides req at the current time: the clock is read once before
// the checks and again under the mutex, and the second reading (never
// earlier than the first) is what the final checks use.
func (c *Controller) Admit(req *core.AdmissionRequest) (*Permit, error) {
	first := c.clock.Now()
	return c.admit(req, first, func() time.Time {
		second := c.clock.Now()
		if second.Before(first) {
			return first
		}
		return second
	})
}

// AdmitAt decides req as if now were the time of both clock readings.
func (c *Controller) AdmitAt(req *core.AdmissionRequest, now time.Time) (*Permit, error) {
	return c.admit(req, now, func() time.Time { return now })
}

// carried is req with the revision its handle carries: a request that
// names no identity (every field of Revision's identity zero) and whose
// handle the controller's source keeps as one of its own records is that
// record's request. Any other request is itself.
func (c *Controller) carried(req *core.AdmissionRequest) *core.AdmissionRequest {
	if req.Revision.RevisionIdentity != (policy.RevisionIdentity{}) {
		return req
	}
	rs, ok := c.source.(core.RecordSource)
	if !ok {
		return req
	}
	id, _, _, ok := rs.OwnRecord(req.Handle)
	if !ok {
		return req
	}
	r := *req
	r.Revision.RevisionIdentity = *id
	return &r
}

// admit runs the decision table (docs/decision-table.md) in order; the first failure is the
// answer. Steps 1 to 12 read only immutable data; step 13 holds the mutex
// from its clock reading to the commit.
func (c *Controller) admit(req *core.AdmissionRequest, now time.Time, resample func() time.Time) (*Permit, error) {
	req = c.carried(req)
	m := c.model
	node := &m.policy.Node
	if err := checkMetadata(req, node); err != nil { // step 1
		return nil, err
	}
	if err := checkIdentifiers(req, node); err != nil { // step 2
		return nil, err
	}
	tenant, err := m.authorize(&req.Principal, &req.Revision) // step 3
	if err != nil {
		return nil, err
	}
	if req.Priority > node.MaximumPriority { // step 4
		return nil, priorityNotAuthorized("node")
	}
	if req.Priority > tenant.MaximumPriority {
		return nil, priorityNotAuthorized("tenant")
	}
	if c.source == nil { // step 5
		return nil, revisionNotAvailable()
	}
	rev, ok := c.source.RevisionPolicy(&req.Revision)
	if !ok || rev == nil {
		return nil, revisionNotAvailable()
	}
	if err := m.checkRequirements(rev); err != nil { // step 6
		return nil, err
	}
	if !contains(tenant.TrustClasses, rev.TrustClass) { // step 7
		return nil, trustClassNotAuthorized()
	}
	granted := grantOf(&req.RequestedBudget, rev, &node.BudgetCeiling) // step 8
	switch {
	case granted.CPUFuel == 0:
		return nil, budgetInfeasible("cpu-fuel")
	case granted.MemoryBytes == 0:
		return nil, budgetInfeasible("memory-bytes")
	case granted.WallTime.Value == 0:
		return nil, budgetInfeasible("wall-time")
	}
	trust := m.trustClasses[rev.TrustClass]
	cell, err := m.selectCell(granted.MemoryBytes, rev, tenant, trust) // step 9
	if err != nil {
		return nil, err
	}
	if req.PayloadBytes > node.MaximumPayloadBytes { // step 10
		return nil, payloadTooLarge("node")
	}
	if req.PayloadBytes > tenant.MaximumPayloadBytes {
		return nil, payloadTooLarge("tenant")
	}
	if callerDeadlinePassed(req, now) { // step 11
		return nil, deadlineExceeded()
	}
	// Step 12. A sample observed after the first reading was published
	// after it, not from the future: on the live path it is judged at a
	// fresh reading (AdmitAt's readings are all now).
	judgeLoadAt := now
	if c.load != nil {
		if sample, ok := c.load.CurrentLoad(); ok && sample != nil && sample.ObservedAt.After(now) {
			judgeLoadAt = resample()
		}
	}
	if _, err := c.loadAt(judgeLoadAt); err != nil {
		return nil, err
	}
	admittedAt := now
	effectiveDeadline := bindDeadline(now, granted.WallTime.Value, req.Deadline)
	r := &reservation{
		tenant: tenant.ID, trustClass: trust.Name, queueClass: m.queueClassFor(req.Priority).Name,
		cellClass: cell.Class, fuel: granted.CPUFuel, memory: granted.MemoryBytes,
	}
	key := liveKey(tenant.ID, req.ActivationID)

	// Step 13, under the mutex with the clock read again.
	m.mu.Lock()
	defer m.mu.Unlock()
	now = resample()
	if callerDeadlinePassed(req, now) {
		return nil, deadlineExceeded()
	}
	sample, err := c.loadAt(now)
	if err != nil {
		return nil, err
	}
	if _, dup := m.live[key]; dup {
		return nil, activationIDUnavailable()
	}
	if err := m.capacityLocked(r, now); err != nil {
		return nil, err
	}
	class, _ := policy.ParseCellClass(cell.Class)
	if err := m.feasibleLocked(effectiveDeadline.Sub(now), cell, sample.QueueDelay[class]); err != nil {
		return nil, err
	}
	m.reserveLocked(key, r)
	p := &Permit{
		model:       m,
		clock:       c.clock,
		key:         key,
		reservation: r,
		grant: grant{
			activationID: req.ActivationID,
			revision:     req.Revision.RevisionIdentity,
			budget:       shortened(granted, effectiveDeadline.Sub(admittedAt)),
			deadline:     effectiveDeadline,
			admittedAt:   admittedAt,
			obligations: core.Obligations{
				CellClass: class, QueueClass: r.queueClass, TrustClass: r.trustClass, Priority: req.Priority,
				Backend: rev.Backend, Threading: rev.Threading, StateModel: rev.StateModel,
				Features: core.NewFeatures(rev.Features...), CallDepthLimit: rev.CallDepthLimit,
			},
		},
	}
	return p, nil
}

// loadAt is step 12: the current sample must exist, be observed at or
// before now and at most the maximum age ago; then CPU, then memory
// pressure must be below its threshold.
func (c *Controller) loadAt(now time.Time) (*core.LoadSample, error) {
	if c.load == nil {
		return nil, loadUnavailable()
	}
	sample, ok := c.load.CurrentLoad()
	if !ok || sample == nil {
		return nil, loadUnavailable()
	}
	overload := &c.model.policy.Node.Overload
	if sample.ObservedAt.After(now) || now.Sub(sample.ObservedAt) > overload.MaximumObservationAge {
		return nil, loadUnavailable()
	}
	if sample.CPUPressure >= overload.CPUThreshold {
		return nil, nodeOverloaded("cpu-pressure")
	}
	if sample.MemoryPressure >= overload.MemoryThreshold {
		return nil, nodeOverloaded("memory-pressure")
	}
	return sample, nil
}

// callerDeadlinePassed is step 11: a caller deadline at or before now.
func callerDeadlinePassed(req *core.AdmissionRequest, now time.Time) bool {
	return req.Deadline.Set && !time.UnixMilli(req.Deadline.Value).After(now)
}

// bindDeadline is the effective deadline: the earlier of now plus the
// granted wall time and the caller's deadline.
func bindDeadline(now time.Time, wall time.Duration, caller policy.Optional[int64]) time.Time {
	remaining := wall
	if caller.Set {
		if untilCaller := time.UnixMilli(caller.Value).Sub(now); untilCaller < remaining {
			remaining = untilCaller
		}
	}
	return now.Add(remaining)
}

// shortened is the grant with the wall time the effective deadline leaves.
func shortened(b policy.Budget, wall time.Duration) policy.Budget {
	b.WallTime = policy.Some(wall)
	return b
}
