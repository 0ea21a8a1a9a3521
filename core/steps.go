package core

import (
	"math"
	"math/bits"
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// This file is the decision table, read top to bottom: one function per
// step, in the order the steps run, and the first failure is the answer.
// Steps 1 to 10 cannot change their answer with time (the request, the
// policy and the pinned catalog view are all fixed), so they run before
// the clock is read; steps 11 and 12 judge the first reading; steps 1 to
// 12 run without the ledger's locks and allocate nothing; step 13 runs
// in a ledger transaction and is the only one that moves a counter.

// decision is what steps 1 to 12 establish for the commit.
type decision struct {
	reservation atomicledger.Reservation
	fingerprint atomicledger.Fingerprint
	room        atomicledger.Room // what the pre-check saw of the reservation's room
	rev         *policy.RevisionPolicy
	identity    *policy.RevisionIdentity // the record's, equal to the request's; nil from a plain source
	slot        *policy.RecordSlot       // the record's requirements slot; nil from a plain source
	reqs        *policy.Requirements     // the record's requirements, when step 2 took them from its slot
	// principalListed: step 2 found (tenant, kind, subject) on the
	// allowlists; reservation.Tenant is the tenant's ID.
	principalListed bool
	// ownTenant: step 2 found the principal's tenant equal to the
	// revision's (both the source's own record's), so step 3 need not
	// compare them again.
	ownTenant      bool
	features       policy.FeatureSet
	trustPermitted bool                // step 7: the revision's tenant permits its trust class (reservation.TrustClass)
	cells          policy.CellClassSet // configured classes compatible with the revision's threading and features
	grant          policy.Budget
	untilCaller    time.Duration // from the first reading to the caller's deadline, when it has one
	wall           time.Duration // effective: the deadline is admittedAt + wall
	admittedAt     time.Time     // the first clock reading, unless derived
	// derived: the first reading is the controller's base plus
	// sinceBase (see firstReading).
	derived     bool
	sinceBase   time.Duration
	parallelism uint64
	// in is where the decision reads its clock and load; nil is the
	// controller's own (inputs.go).
	in Inputs
}

// checkRequest runs steps 1 to 4: the request's own metadata,
// identifiers, principal and priority.
func (c *AdmissionController) checkRequest(req *AdmissionRequest, d *decision) *rejection {
	node := &c.provider.node
	if err := checkMetadata(req, node); err != nil {
		return err
	}
	if err := c.checkIdentifiers(req, node, d); err != nil {
		return err
	}
	if err := c.checkPrincipal(req, d); err != nil {
		return err
	}
	return c.checkPriority(req, d)
}

// checkPolicy runs steps 5 to 10: the revision in the pinned view, its
// requirements, trust class, grant, cell class and the payload bound.
func (c *AdmissionController) checkPolicy(req *AdmissionRequest, d *decision) *rejection {
	if err := c.checkRevision(req, d); err != nil {
		return err
	}
	if err := c.checkRequirements(req, d); err != nil {
		return err
	}
	if err := c.checkTrustClass(d); err != nil {
		return err
	}
	if err := c.checkGrant(req, d); err != nil {
		return err
	}
	if err := c.checkCell(d); err != nil {
		return err
	}
	return c.checkPayload(req, d)
}

// checkAt runs steps 11 and 12 at d.admittedAt, the first clock reading,
// and binds the reservation and the effective deadline. Nothing here
// takes the mutex or allocates.
func (c *AdmissionController) checkAt(req *AdmissionRequest, d *decision) *rejection {
	if err := c.checkCallerDeadline(req, d); err != nil {
		return err
	}
	if err := c.checkLoad(d); err != nil {
		return err
	}
	c.bind(req, d)
	return nil
}

// checkMetadata is step 1: the aggregate entries, then bytes (UTF-8
// lengths of every key and value), of claims, request attributes and
// revision attributes.
func checkMetadata(req *AdmissionRequest, node *policy.NodeSettings) *rejection {
	entries := uint64(len(req.Principal.Claims)) + uint64(len(req.Attributes)) + uint64(len(req.Revision.Attributes))
	if entries > uint64(node.MaximumMetadataEntries) {
		return errMetadataEntries
	}
	if entries == 0 {
		return nil
	}
	var total uint64
	limit := node.MaximumMetadataBytes
	for _, m := range [...]map[string]string{req.Principal.Claims, req.Attributes, req.Revision.Attributes} {
		for k, v := range m {
			total += uint64(len(k)) + uint64(len(v))
			if total > limit {
				return errMetadataBytes
			}
		}
	}
	return nil
}

// checkIdentifiers is step 2, field by field in table order, then the
// later-phase budget dimensions. A request whose handle the controller's
// source recognises as one of its own records, and whose identity is
// that record's, needs only the identity's lengths checked against the
// node's bounds: the source validated its characters when it built the
// record. The record is kept for step 5. Any other identity is scanned,
// so a forged or edited one still gets step 2's answer before step 5's.
func (c *AdmissionController) checkIdentifiers(req *AdmissionRequest, node *policy.NodeSettings, d *decision) *rejection {
	max := node.MaximumIdentifierBytes
	if !policy.ValidIdentifier(req.ActivationID, max) {
		return errActivationID
	}
	// The handle's record, when the source recognises it as its own: a
	// pointer comparison, no lookup. Nothing is answered from it before
	// the principal's fields are.
	var own *policy.RevisionIdentity
	var ownRev *policy.RevisionPolicy
	var ownSlot *policy.RecordSlot
	if c.records != nil && req.Handle != nil {
		if id, rev, slot, ok := c.records.OwnRecord(req.Handle); ok {
			own, ownRev, ownSlot = id, rev, slot
		}
	}
	p := &req.Principal
	// A listed principal's subject and tenant are names the node policy
	// validated, against this node's bound, when it was compiled: they
	// need no scan, and step 3 uses the lookup. Any other is scanned, so
	// an invalid one still gets step 2's answer before step 3's. The
	// principal of the record's own tenant is looked up by the tenant ID
	// derived once for the record, with one hash of the subject.
	ownTenant := own != nil && p.Tenant == own.Tenant
	if ownTenant {
		d.reqs = ownSlot.For(c.provider.policy, own.Tenant, ownRev)
		d.principalListed = d.reqs.TenantKnown && c.provider.policy.Authorized(d.reqs.Tenant, p.Kind, p.Subject)
		if d.principalListed {
			d.reservation.Tenant = d.reqs.Tenant
		}
	} else {
		d.reservation.Tenant, d.principalListed = c.provider.policy.AuthorizedPrincipal(p.Tenant, p.Kind, p.Subject)
	}
	if !d.principalListed {
		// The record's tenant is a name its source validated: equal to
		// it, the principal's needs only its length checked.
		switch {
		case !policy.ValidIdentifier(p.Subject, max):
			return errPrincipalSubject
		case ownTenant && uint64(len(p.Tenant)) > uint64(max), !ownTenant && !policy.ValidIdentifier(p.Tenant, max):
			return errPrincipalTenant
		}
	}
	if p.Service != "" && !policy.ValidIdentifier(p.Service, max) {
		return errPrincipalService
	}
	r := &req.Revision
	held := &noIdentity
	if own != nil {
		// A request that names no identity carries its handle's: the
		// record is its revision by construction, and only the record's
		// lengths are checked against the node's bounds.
		if zeroIdentity(&r.RevisionIdentity) {
			if err := recordTooLong(own, node); err != nil {
				return err
			}
			d.identity, d.rev, d.slot, d.ownTenant = own, ownRev, ownSlot, ownTenant
			return checkBudgetDimensions(&req.RequestedBudget)
		}
		held = own
	}
	// Each field is compared with the held record's once: equal, it was
	// validated by the source and needs only its length checked; any
	// other is scanned. An identity equal to the record's in every field
	// is the record's.
	same := own != nil && r.Generation == own.Generation
	gen := node.MaximumGeneratedIdentifierBytes
	switch {
	case !validAs(r.Tenant, held.Tenant, max, &same):
		return errRevisionTenant
	case !validAs(r.Service, held.Service, max, &same):
		return errRevisionService
	case !validAs(r.Route, held.Route, max, &same):
		return errRevisionRoute
	case !validAs(r.Contract, held.Contract, max, &same):
		return errRevisionContract
	case !validAs(r.Function, held.Function, max, &same):
		return errRevisionFunction
	case !validAs(r.Revision, held.Revision, gen, &same):
		return errRevisionID
	case !validAs(r.Release, held.Release, gen, &same):
		return errReleaseID
	}
	if same {
		d.identity, d.rev, d.slot, d.ownTenant = own, ownRev, ownSlot, ownTenant
	} else {
		d.reqs = nil
	}
	return checkBudgetDimensions(&req.RequestedBudget)
}

// noIdentity is the held identity when the request's handle names no
// record of the source: its empty fields equal no valid identifier.
var noIdentity policy.RevisionIdentity

// validAs is policy.ValidIdentifier(s, maxBytes) for an s that may equal
// held, a non-empty identifier of a record the source validated: equal
// to it, s obeys the character rules and only its length is checked.
// Unequal, it clears *same.
func validAs(s, held string, maxBytes uint32, same *bool) bool {
	if s == held {
		// 1 to maxBytes long: an empty s (held by noIdentity) wraps.
		return uint64(len(s))-1 < uint64(maxBytes)
	}
	*same = false
	return policy.ValidIdentifier(s, maxBytes)
}

// zeroIdentity reports whether r names no revision at all: no field set.
func zeroIdentity(r *policy.RevisionIdentity) bool {
	return r.Generation == 0 && len(r.Tenant)|len(r.Service)|len(r.Route)|len(r.Contract)|len(r.Function)|len(r.Revision)|len(r.Release) == 0
}

// recordTooLong is nil when every field of a record's identity is
// within the node's length bounds (the catalog's own bound may be
// looser), and otherwise step 2's answer for the first field that is
// not, in table order.
func recordTooLong(r *policy.RevisionIdentity, node *policy.NodeSettings) *rejection {
	max, gen := uint64(node.MaximumIdentifierBytes), uint64(node.MaximumGeneratedIdentifierBytes)
	switch {
	case uint64(len(r.Tenant)) > max:
		return errRevisionTenant
	case uint64(len(r.Service)) > max:
		return errRevisionService
	case uint64(len(r.Route)) > max:
		return errRevisionRoute
	case uint64(len(r.Contract)) > max:
		return errRevisionContract
	case uint64(len(r.Function)) > max:
		return errRevisionFunction
	case uint64(len(r.Revision)) > gen:
		return errRevisionID
	case uint64(len(r.Release)) > gen:
		return errReleaseID
	}
	return nil
}

// checkBudgetDimensions is the end of step 2: the later-phase budget
// dimensions must be zero.
func checkBudgetDimensions(b *policy.Budget) *rejection {
	switch {
	case b.NetworkEgressBytes != 0:
		return errNetworkEgress
	case b.StorageBytes != 0:
		return errStorage
	case b.OutboundCalls != 0:
		return errOutboundCalls
	}
	return nil
}

// checkPrincipal is step 3: authentication facts against the tenant
// allowlist. An anonymous principal, an unknown tenant, a principal of
// another tenant than the revision's, one not listed, and a service
// principal without a service identity all get the same answer.
func (c *AdmissionController) checkPrincipal(req *AdmissionRequest, d *decision) *rejection {
	p := &req.Principal
	if p.Kind == policy.AnonymousPrincipal {
		return errPrincipalDenied
	}
	// Step 2 looked (tenant, kind, subject) up on the allowlists.
	if !d.principalListed || (!d.ownTenant && p.Tenant != revisionTenant(req, d)) || (p.Kind == policy.ServicePrincipal && p.Service == "") {
		return errPrincipalDenied
	}
	return nil
}

// revisionTenant is the tenant of the request's revision: its record's
// when step 2 found it (the request may name none), the request's own
// otherwise.
func revisionTenant(req *AdmissionRequest, d *decision) string {
	if d.identity != nil {
		return d.identity.Tenant
	}
	return req.Revision.Tenant
}

// checkPriority is step 4: the node's maximum, then the tenant's.
func (c *AdmissionController) checkPriority(req *AdmissionRequest, d *decision) *rejection {
	pr := c.provider
	if req.Priority > pr.node.MaximumPriority {
		return errNodePriority
	}
	if req.Priority > pr.tenants[d.reservation.Tenant].MaximumPriority {
		return errTenantPriority
	}
	return nil
}

// checkRevision is step 5: the pinned view verifies the whole tuple,
// unless step 2 found the request's own record by its handle.
func (c *AdmissionController) checkRevision(req *AdmissionRequest, d *decision) *rejection {
	if d.rev != nil {
		return nil
	}
	switch {
	case c.records != nil:
		id, rev, slot, ok := c.records.RevisionRecord(req.Handle, &req.Revision)
		if ok {
			d.identity, d.rev, d.slot = id, rev, slot
		}
	case c.source != nil:
		if rev, ok := c.source.RevisionPolicy(&req.Revision); ok {
			d.rev = rev
		}
	}
	if d.rev == nil {
		return errRevisionMissing
	}
	return nil
}

// checkRequirements is step 6: backend, state model, threading and
// features the node offers, then placement. It records the revision's
// features as a bitset of the node's, and its trust class for step 7:
// derived once per record and policy when the source keeps records
// ([policy.RecordSlot]), per request otherwise.
func (c *AdmissionController) checkRequirements(req *AdmissionRequest, d *decision) *rejection {
	reqs := d.reqs
	switch {
	case reqs != nil:
	case d.slot != nil:
		reqs = d.slot.For(c.provider.policy, d.identity.Tenant, d.rev)
	default:
		derived := c.provider.policy.Requirements(req.Revision.Tenant, d.rev)
		reqs = &derived
	}
	if err := unmetErrors[reqs.Unmet]; err != nil {
		return err
	}
	d.features, d.cells = reqs.Features, reqs.Cells
	d.reservation.TrustClass, d.trustPermitted = reqs.Trust, reqs.TrustPermitted
	return nil
}

// checkTrustClass is step 7: the tenant must permit the revision's
// trust class. Step 3 made the principal's tenant the revision's, so the
// answer the requirements derived for the revision's tenant is the
// request's.
func (c *AdmissionController) checkTrustClass(d *decision) *rejection {
	if !d.trustPermitted {
		return errTrustClass
	}
	return nil
}

// checkGrant is step 8: a dimension granted nothing is infeasible.
func (c *AdmissionController) checkGrant(req *AdmissionRequest, d *decision) *rejection {
	grantInto(&d.grant, &req.RequestedBudget, d.rev, &c.provider.node.BudgetCeiling)
	switch {
	case d.grant.CPUFuel == 0:
		return errZeroFuel
	case d.grant.MemoryBytes == 0:
		return errZeroMemory
	case d.grant.WallTime.Value == 0:
		return errZeroWallTime
	}
	return nil
}

// grantInto sets g to the per-dimension minimum of request, capsule
// ceiling, deployment ceiling and node ceiling; an omitted wall time adds
// no limit at its layer, and the node's is always set. It writes in place:
// the decision is on the caller's stack, and a returned Budget would be
// copied into it.
func grantInto(g *policy.Budget, req *policy.Budget, rev *policy.RevisionPolicy, node *policy.NodeBudgetCeiling) {
	capsule, deployment := &rev.CapsuleCeiling, &rev.DeploymentCeiling
	fuel, memory := min(req.CPUFuel, node.CPUFuel), min(req.MemoryBytes, node.MemoryBytes)
	if capsule.CPUFuel.Set {
		fuel = min(fuel, capsule.CPUFuel.Value)
	}
	if deployment.CPUFuel.Set {
		fuel = min(fuel, deployment.CPUFuel.Value)
	}
	if capsule.MemoryBytes.Set {
		memory = min(memory, capsule.MemoryBytes.Value)
	}
	if deployment.MemoryBytes.Set {
		memory = min(memory, deployment.MemoryBytes.Value)
	}
	wall := capWall(capWall(capWall(node.WallTime, req.WallTime), capsule.WallTime), deployment.WallTime)
	*g = policy.Budget{CPUFuel: fuel, MemoryBytes: memory, WallTime: policy.Optional[time.Duration]{Value: wall, Set: true}}
}

// capWall lowers wall to a layer's limit, when the layer sets one; a
// negative limit grants nothing.
func capWall(wall time.Duration, limit policy.Optional[time.Duration]) time.Duration {
	if limit.Set && limit.Value < wall {
		return max(limit.Value, 0)
	}
	return wall
}

// checkCell is step 9: the smallest compatible, permitted cell class.
func (c *AdmissionController) checkCell(d *decision) *rejection {
	pr := c.provider
	r := &d.reservation
	cell, err := pr.selectCell(d.grant.MemoryBytes, d.cells, pr.tenants[r.Tenant].CellClasses, pr.trust[r.TrustClass].CellClasses)
	if err != nil {
		return err
	}
	r.CellClass = cell
	d.parallelism = pr.cells[cell].Parallelism
	return nil
}

// selectCell is step 9: the smallest configured class that is memory-,
// threading- and feature-compatible (candidates: the configured classes
// compatible with the revision's threading and features) and permitted
// by both the tenant and the trust class. Extra-large therefore needs
// both to list it.
func (pr *LocalQuotaProvider) selectCell(memory uint64, candidates, tenantCells, trustCells policy.CellClassSet) (policy.CellClass, *rejection) {
	// A CellClassSet is a bit set (bit i for class i), so the sets are
	// combined and the smallest class picked with bit operations.
	var fits policy.CellClassSet
	for i := range pr.cells {
		if pr.cells[i].MemoryBytes >= memory {
			fits |= 1 << i
		}
	}
	compatible := candidates & fits
	if compatible == 0 {
		return 0, errNoCompatibleCell
	}
	permitted := compatible & tenantCells
	if permitted == 0 {
		return 0, errTenantCellClass
	}
	permitted &= trustCells
	if permitted == 0 {
		return 0, errTrustCellClass
	}
	return policy.CellClass(bits.TrailingZeros8(uint8(permitted))), nil
}

// checkPayload is step 10: the node's maximum, then the tenant's;
// equality is accepted.
func (c *AdmissionController) checkPayload(req *AdmissionRequest, d *decision) *rejection {
	pr := c.provider
	if req.PayloadBytes > pr.node.MaximumPayloadBytes {
		return errNodePayload
	}
	if req.PayloadBytes > pr.tenants[d.reservation.Tenant].MaximumPayloadBytes {
		return errTenantPayload
	}
	return nil
}

// checkCallerDeadline is step 11: a caller deadline at or before now.
func (c *AdmissionController) checkCallerDeadline(req *AdmissionRequest, d *decision) *rejection {
	if !req.Deadline.Set {
		return nil
	}
	d.untilCaller = deadline.UntilCaller(d.admittedAt, req.Deadline.Value)
	if d.untilCaller <= 0 {
		return errDeadlineExceeded
	}
	return nil
}

// checkLoad is step 12: the sample must be usable, then CPU, then memory
// pressure must be below its threshold.
func (c *AdmissionController) checkLoad(d *decision) *rejection {
	sample, ok := c.step12Load(d)
	if ok && d.derived && !deadline.HasMonotonic(sample.ObservedAt) {
		// A sample that carries only a wall-clock time is judged against
		// the system's wall clock, not one derived from the controller's
		// base (see firstReading).
		d.admittedAt, d.derived = c.firstNow(d), false
	}
	var age, elapsed time.Duration
	if ok {
		age = c.sampleAge(sample, d)
		if age < 0 {
			// Published after this request's clock reading, not from
			// the future: the sampler observed it before we loaded it,
			// so a fresh monotonic reading is at or after it. Judging it
			// against the older reading would reject valid work for a
			// race.
			elapsed = c.step12Since(d)
		}
	}
	if err := loadVerdict(sample, ok, age, elapsed, &c.provider.node.Overload); err != nil {
		return err
	}
	return nil
}

// sampleAge is the age of s at the first reading. A derived reading and a
// sample with a monotonic reading differ by monotonic offsets from the
// base, so no time.Time is built.
func (c *AdmissionController) sampleAge(s *LoadSample, d *decision) time.Duration {
	if !d.derived {
		return d.admittedAt.Sub(s.ObservedAt)
	}
	rel := s.ObservedAt.Sub(c.base)
	age := d.sinceBase - rel
	if rel < 0 && age < 0 {
		return math.MaxInt64 // wrapped: older than any maximum age
	}
	return age
}

// bind sets the reservation's queue class and amounts, the effective
// deadline and the activation's fingerprint.
func (c *AdmissionController) bind(req *AdmissionRequest, d *decision) {
	r := &d.reservation
	r.QueueClass = c.provider.queueOf[req.Priority]
	r.CPUFuel, r.MemoryBytes = d.grant.CPUFuel, d.grant.MemoryBytes
	d.wall = d.grant.WallTime.Value
	if req.Deadline.Set {
		d.wall = deadline.Shorten(d.wall, d.untilCaller)
	}
	d.fingerprint = atomicledger.FingerprintOf(r.Tenant, req.ActivationID)
}

// preCheck is the lock-free capacity pre-check: a shortfall it can
// decide exactly is the answer step 13 would give had no time passed, so
// it is answered without the mutex.
func (c *AdmissionController) preCheck(d *decision) *rejection {
	pr := c.provider
	r := &d.reservation
	s, exact, room := pr.ledger.PreCheck(d.fingerprint, r)
	d.room = room
	if !exact {
		return nil
	}
	if s.Scope == atomicledger.NodeScope || s.Scope == atomicledger.TenantScope {
		return capacityError(s)
	}
	if pr.tenants[r.Tenant].FleetLimited {
		// The fleet scope comes after the tenant's. A shortfall behind
		// it is left to the transaction, which judges the slice first.
		if s.Scope != atomicledger.NoScope {
			return nil
		}
		return c.preCheckFleet(d)
	}
	if s.Scope != atomicledger.NoScope {
		return capacityError(s)
	}
	return nil
}

// commit runs step 13 in one ledger transaction, which it enters once and
// leaves in one place; the permit is built after the transaction ends.
// order is the transaction's place in the ledger's order on a recording
// provider (0 on any other), the permit's and the decision's.
func (c *AdmissionController) commit(req *AdmissionRequest, d *decision) (p *AdmissionPermit, order uint64, err *rejection) {
	var ticket atomicledger.Ticket
	ticket, err, order = c.commitTx(req, d)
	if err != nil {
		return nil, order, err
	}
	return c.newPermit(req, d, ticket, order), order, nil
}

// commitTx runs commitLocked in one ledger transaction and returns its
// order. The transaction ends on every path: the load source commitLocked
// reads is the embedder's.
func (c *AdmissionController) commitTx(req *AdmissionRequest, d *decision) (atomicledger.Ticket, *rejection, uint64) {
	tx := c.provider.ledger.Begin()
	defer tx.End()
	ticket, err := c.commitLocked(tx, req, d)
	return ticket, err, c.provider.orderOf(tx)
}

// commitLocked is step 13: the clock is resampled, the deadline and load
// are judged again, then duplicate, capacity and feasibility, and only
// then does any counter move.
func (c *AdmissionController) commitLocked(tx atomicledger.Tx, req *AdmissionRequest, d *decision) (atomicledger.Ticket, *rejection) {
	pr := c.provider
	// Now is the first reading + elapsed; every judgment below is a
	// duration from the first reading, so no time.Time is built.
	elapsed := c.commitSince(d)
	if req.Deadline.Set && d.untilCaller <= elapsed {
		return atomicledger.Ticket{}, errDeadlineExceeded
	}
	sample, ok := c.commitLoad(d)
	var age time.Duration
	if ok {
		age = c.sampleAge(sample, d)
	}
	if err := loadVerdict(sample, ok, age, elapsed, &pr.node.Overload); err != nil {
		return atomicledger.Ticket{}, err
	}
	r := &d.reservation
	look := tx.Assess(d.room, d.fingerprint, req.ActivationID, r)
	if look.Duplicate {
		return atomicledger.Ticket{}, errDuplicate
	}
	s := look.Shortfall
	if s.Scope == atomicledger.NodeScope || s.Scope == atomicledger.TenantScope {
		return atomicledger.Ticket{}, capacityError(s)
	}
	if pr.tenants[r.Tenant].FleetLimited {
		if err := c.checkFleetLocked(tx, d, elapsed); err != nil {
			return atomicledger.Ticket{}, err
		}
	}
	if s.Scope != atomicledger.NoScope {
		return atomicledger.Ticket{}, capacityError(s)
	}
	switch deadline.Check(d.wall-elapsed, look.CellBacklog, d.parallelism,
		sample.QueueDelay[r.CellClass], pr.estimate()) {
	case deadline.Infeasible:
		return atomicledger.Ticket{}, errQueueInfeasible
	case deadline.InfeasibleAlways, deadline.Overflow:
		return atomicledger.Ticket{}, errQueueNeverFeasible
	}
	return tx.Reserve(d.fingerprint, req.ActivationID, *r), nil
}

func (p *LocalQuotaProvider) estimate() deadline.Estimate {
	return deadline.Estimate{
		EstimatedServiceTime: p.node.Deadline.EstimatedServiceTime,
		MinimumExecutionTime: p.node.Deadline.MinimumExecutionTime,
		SafetyMargin:         p.node.Deadline.SafetyMargin,
	}
}
