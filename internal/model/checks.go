package model

import (
	"math"
	"math/bits"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

func contains(list []string, s string) bool { return slices.Contains(list, s) }

// checkMetadata is step 1: aggregate entries, then bytes, of the claims,
// the request attributes and the revision attributes.
func checkMetadata(req *core.AdmissionRequest, node *policy.NodePolicy) error {
	maps := []map[string]string{req.Principal.Claims, req.Attributes, req.Revision.Attributes}
	var entries, size uint64
	for _, m := range maps {
		entries += uint64(len(m))
		for k, v := range m {
			size += uint64(len(k)) + uint64(len(v))
		}
	}
	if entries > uint64(node.MaximumMetadataEntries) {
		return metadataTooLarge("metadata-entries")
	}
	if size > node.MaximumMetadataBytes {
		return metadataTooLarge("metadata-bytes")
	}
	return nil
}

// validIdentifier is the identifier rule (docs/decision-table.md), written out directly: not
// empty, at most maxBytes bytes, UTF-8, no white space, control or format
// character in Unicode's sense.
func validIdentifier(s string, maxBytes uint32) bool {
	if s == "" || uint64(len(s)) > uint64(maxBytes) || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// checkIdentifiers is step 2, field by field in table order, then the
// later-phase budget dimensions.
func checkIdentifiers(req *core.AdmissionRequest, node *policy.NodePolicy) error {
	limit, generated := node.MaximumIdentifierBytes, node.MaximumGeneratedIdentifierBytes
	p, r := &req.Principal, &req.Revision
	fields := []struct {
		scope, dimension string
		value            string
		limit            uint32
		optional         bool
	}{
		{"request", "activation-id", req.ActivationID, limit, false},
		{"principal", "subject", p.Subject, limit, false},
		{"principal", "tenant", p.Tenant, limit, false},
		{"principal", "service", p.Service, limit, true},
		{"revision", "tenant", r.Tenant, limit, false},
		{"revision", "service", r.Service, limit, false},
		{"revision", "route", r.Route, limit, false},
		{"revision", "contract", r.Contract, limit, false},
		{"revision", "function", r.Function, limit, false},
		{"revision", "revision-id", r.Revision, generated, false},
		{"revision", "release-id", r.Release, generated, false},
	}
	for _, f := range fields {
		if f.optional && f.value == "" {
			continue
		}
		if !validIdentifier(f.value, f.limit) {
			return invalidIdentifier(f.scope, f.dimension)
		}
	}
	b := &req.RequestedBudget
	switch {
	case b.NetworkEgressBytes != 0:
		return unsupportedBudgetDimension("network-egress-bytes")
	case b.StorageBytes != 0:
		return unsupportedBudgetDimension("storage-bytes")
	case b.OutboundCalls != 0:
		return unsupportedBudgetDimension("outbound-calls")
	}
	return nil
}

// authorize is step 3: a user or service principal of a configured tenant,
// naming that same tenant's revision, on its allowlist; a service
// principal must carry a service identity.
func (m *Model) authorize(p *core.Principal, rev *policy.ResolvedRevision) (*policy.TenantPolicy, error) {
	if p.Kind != policy.UserPrincipal && p.Kind != policy.ServicePrincipal {
		return nil, principalNotAuthorized()
	}
	tenant, ok := m.tenants[p.Tenant]
	if !ok || p.Tenant != rev.Tenant {
		return nil, principalNotAuthorized()
	}
	listed := false
	for _, allowed := range tenant.Principals {
		if allowed.Kind == p.Kind.String() && allowed.Subject == p.Subject {
			listed = true
		}
	}
	if !listed || (p.Kind == policy.ServicePrincipal && p.Service == "") {
		return nil, principalNotAuthorized()
	}
	return tenant, nil
}

// checkRequirements is step 6: backend, state model, threading and every
// feature must be offered by the node (threading and each feature by some
// configured cell class), then placement.
func (m *Model) checkRequirements(rev *policy.RevisionPolicy) error {
	node := &m.policy.Node
	if !contains(node.Backends, rev.Backend) {
		return unsupportedRequirement("backend")
	}
	if !contains(node.StateModels, rev.StateModel) {
		return unsupportedRequirement("state-model")
	}
	threading := false
	for _, cell := range m.policy.CellClasses {
		if contains(cell.Threading, rev.Threading.String()) {
			threading = true
		}
	}
	if !threading {
		return unsupportedRequirement("threading")
	}
	for _, f := range rev.Features {
		offered := false
		for _, cell := range m.policy.CellClasses {
			if contains(cell.Features, f) {
				offered = true
			}
		}
		if !offered {
			return unsupportedRequirement("features")
		}
	}
	pl := &rev.Placement
	switch {
	case len(pl.Architectures) > 0 && !contains(pl.Architectures, node.Placement.Architecture):
		return placementNotCompatible("architecture")
	case len(pl.Regions) > 0 && !contains(pl.Regions, node.Placement.Region):
		return placementNotCompatible("region")
	case len(pl.Zones) > 0 && !contains(pl.Zones, node.Placement.Zone):
		return placementNotCompatible("zone")
	}
	return nil
}

// grantOf is step 8's grant: per dimension the minimum of the request, the
// capsule and deployment ceilings (where set) and the node ceiling; wall
// time starts at the node's and a negative one grants nothing.
func grantOf(req *policy.Budget, rev *policy.RevisionPolicy, node *policy.NodeBudgetCeiling) policy.Budget {
	g := policy.Budget{
		CPUFuel:     min(req.CPUFuel, node.CPUFuel),
		MemoryBytes: min(req.MemoryBytes, node.MemoryBytes),
		WallTime:    policy.Some(node.WallTime),
	}
	for _, ceiling := range []policy.Ceiling{rev.CapsuleCeiling, rev.DeploymentCeiling} {
		if ceiling.CPUFuel.Set {
			g.CPUFuel = min(g.CPUFuel, ceiling.CPUFuel.Value)
		}
		if ceiling.MemoryBytes.Set {
			g.MemoryBytes = min(g.MemoryBytes, ceiling.MemoryBytes.Value)
		}
	}
	for _, wall := range []policy.Optional[time.Duration]{req.WallTime, rev.CapsuleCeiling.WallTime, rev.DeploymentCeiling.WallTime} {
		if wall.Set {
			g.WallTime.Value = min(g.WallTime.Value, wall.Value)
		}
	}
	g.WallTime.Value = max(g.WallTime.Value, 0)
	return g
}

// selectCell is step 9: among the configured classes, smallest first, the
// first with enough memory, the revision's threading model and all its
// features that both the tenant and the trust class list.
func (m *Model) selectCell(memory uint64, rev *policy.RevisionPolicy, tenant *policy.TenantPolicy,
	trust *policy.TrustClassPolicy) (*policy.CellClassPolicy, error) {
	var compatible []*policy.CellClassPolicy
	for i := 0; i < policy.NumCellClasses; i++ {
		cell, ok := m.cellClasses[policy.CellClass(i).String()]
		if !ok || cell.MemoryBytes < memory || !contains(cell.Threading, rev.Threading.String()) {
			continue
		}
		hasAll := true
		for _, f := range rev.Features {
			if !contains(cell.Features, f) {
				hasAll = false
			}
		}
		if hasAll {
			compatible = append(compatible, cell)
		}
	}
	if len(compatible) == 0 {
		return nil, noCompatibleCell()
	}
	var tenantPermits []*policy.CellClassPolicy
	for _, cell := range compatible {
		if contains(tenant.CellClasses, cell.Class) {
			tenantPermits = append(tenantPermits, cell)
		}
	}
	if len(tenantPermits) == 0 {
		return nil, cellClassNotAuthorized("tenant")
	}
	for _, cell := range tenantPermits {
		if contains(trust.CellClasses, cell.Class) {
			return cell, nil
		}
	}
	return nil, cellClassNotAuthorized("trust-class")
}

// queueClassFor is the queue class whose priority range holds priority;
// validation guarantees exactly one for every priority up to the node
// maximum, which step 4 has enforced.
func (m *Model) queueClassFor(priority uint32) *policy.QueueClassPolicy {
	for i := range m.policy.QueueClasses {
		q := &m.policy.QueueClasses[i]
		if q.MinPriority <= priority && priority <= q.MaxPriority {
			return q
		}
	}
	panic("model: no queue class holds a priority the node permits")
}

// capacityLocked is step 13's capacity check: scopes node, tenant, trust
// class (each live, queued, fuel, memory), then the queue class's queued
// bound. The first dimension without room is the answer; it is permanent
// when r needs more than the whole limit. The caller holds mu.
func (m *Model) capacityLocked(r *reservation, now time.Time) error {
	type dimension struct {
		name              string
		used, need, limit uint64
	}
	type scope struct {
		name   string
		used   *usage
		limits policy.Limits
	}
	scopes := []scope{
		{"node", &m.node, m.policy.Node.Limits},
		{"tenant", m.tenantUsage[r.tenant], m.tenants[r.tenant].Limits},
		{"trust-class", m.trustUsage[r.trustClass], m.trustClasses[r.trustClass].Limits},
	}
	check := func(scope string, dims []dimension) error {
		for _, d := range dims {
			if d.need > d.limit {
				return capacityExhausted(scope, d.name, false)
			}
			if d.used > d.limit-d.need {
				return capacityExhausted(scope, d.name, true)
			}
		}
		return nil
	}
	for _, s := range scopes {
		err := check(s.name, []dimension{
			{"live-activations", s.used.live, 1, s.limits.MaxLiveActivations},
			{"queued-reservations", s.used.queued, 1, s.limits.MaxQueuedReservations},
			{"cpu-fuel", s.used.fuel, r.fuel, s.limits.MaxReservedCPUFuel},
			{"memory-bytes", s.used.memory, r.memory, s.limits.MaxReservedMemoryBytes},
		})
		if err != nil {
			return err
		}
		if s.name == "tenant" && m.fleetLimited[r.tenant] {
			// The fleet scope comes right after the tenant's.
			if err := m.fleetLocked(r.tenant, now); err != nil {
				return err
			}
		}
	}
	queue := m.queueClasses[r.queueClass]
	return check("queue-class", []dimension{{"queued-reservations", m.queueQueued[r.queueClass], 1, queue.MaxQueued}})
}

// feasibleLocked is step 13's queue feasibility for cell class cell with
// remaining time until the effective deadline:
//
//	local_wait = floor(n/p) * estimated_service
//	required   = max(local_wait, observed) + minimum_execution + safety_margin
//	feasible  <=> remaining > required
//
// computed in unsigned 64-bit arithmetic where every intermediate is
// compared with the largest Duration, so an overflow is seen, never
// wrapped. The rejection is retryable only when
// remaining > minimum_execution + safety_margin and nothing overflowed.
// The caller holds mu.
func (m *Model) feasibleLocked(remaining time.Duration, cell *policy.CellClassPolicy, observed time.Duration) error {
	est := m.policy.Node.Deadline
	if observed < 0 || est.EstimatedServiceTime < 0 || est.MinimumExecutionTime < 0 || est.SafetyMargin < 0 {
		return queueDeadlineInfeasible(false) // outside the checked arithmetic: reject
	}
	const largest = uint64(math.MaxInt64)
	n := m.cellLive[cell.Class]
	hi, localWait := bits.Mul64(n/cell.Parallelism, uint64(est.EstimatedServiceTime))
	if hi != 0 || localWait > largest {
		return queueDeadlineInfeasible(false)
	}
	least := uint64(est.MinimumExecutionTime) + uint64(est.SafetyMargin)
	if least > largest {
		return queueDeadlineInfeasible(false)
	}
	required := max(localWait, uint64(observed)) + least
	if required > largest {
		return queueDeadlineInfeasible(false)
	}
	if remaining > 0 && uint64(remaining) > required {
		return nil
	}
	// Waiting helps only if the request could fit with no local wait and
	// no observed delay: remaining > minimum_execution + safety_margin.
	return queueDeadlineInfeasible(remaining > 0 && uint64(remaining) > least)
}
