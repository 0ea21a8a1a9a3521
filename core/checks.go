package core

import (
	"slices"
	"time"

	"latent.dev/admission/policy"
)

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
// later-phase budget dimensions.
func checkIdentifiers(req *AdmissionRequest, node *policy.NodeSettings) *rejection {
	max := node.MaximumIdentifierBytes
	if !policy.ValidIdentifier(req.ActivationID, max) {
		return errActivationID
	}
	p := &req.Principal
	switch {
	case !policy.ValidIdentifier(p.Subject, max):
		return errPrincipalSubject
	case !policy.ValidIdentifier(p.Tenant, max):
		return errPrincipalTenant
	case p.Service != "" && !policy.ValidIdentifier(p.Service, max):
		return errPrincipalService
	}
	r := &req.Revision
	switch {
	case !policy.ValidIdentifier(r.Tenant, max):
		return errRevisionTenant
	case !policy.ValidIdentifier(r.Service, max):
		return errRevisionService
	case !policy.ValidIdentifier(r.Route, max):
		return errRevisionRoute
	case !policy.ValidIdentifier(r.Contract, max):
		return errRevisionContract
	case !policy.ValidIdentifier(r.Function, max):
		return errRevisionFunction
	case !policy.ValidIdentifier(r.Revision, node.MaximumGeneratedIdentifierBytes):
		return errRevisionID
	case !policy.ValidIdentifier(r.Release, node.MaximumGeneratedIdentifierBytes):
		return errReleaseID
	}
	b := &req.RequestedBudget
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

// checkRequirements is step 6: backend, state model, threading and
// features the node offers, then placement. It returns the revision's
// features as a bitset of the node's features.
func (c *AdmissionController) checkRequirements(rev *policy.RevisionPolicy) (policy.FeatureSet, *rejection) {
	pr := c.provider
	if !pr.policy.SupportsBackend(rev.Backend) {
		return 0, errBackend
	}
	if !pr.policy.SupportsStateModel(rev.StateModel) {
		return 0, errStateModel
	}
	if !pr.threading.Has(rev.Threading) {
		return 0, errThreading
	}
	var features policy.FeatureSet
	for _, f := range rev.Features {
		bit, ok := pr.policy.Feature(f)
		if !ok {
			return 0, errFeatures
		}
		features |= bit
	}
	place := &pr.node.Placement
	pl := &rev.Placement
	switch {
	case len(pl.Architectures) > 0 && !slices.Contains(pl.Architectures, place.Architecture):
		return 0, errArchitecture
	case len(pl.Regions) > 0 && !slices.Contains(pl.Regions, place.Region):
		return 0, errRegion
	case len(pl.Zones) > 0 && !slices.Contains(pl.Zones, place.Zone):
		return 0, errZone
	}
	return features, nil
}

// grantOf is the per-dimension minimum of request, capsule ceiling,
// deployment ceiling and node ceiling; an omitted wall time adds no limit
// at its layer, and the node's is always set.
func grantOf(req *policy.Budget, rev *policy.RevisionPolicy, node *policy.NodeBudgetCeiling) policy.Budget {
	capsule, deployment := &rev.CapsuleCeiling, &rev.DeploymentCeiling
	g := policy.Budget{
		CPUFuel:     min(req.CPUFuel, node.CPUFuel),
		MemoryBytes: min(req.MemoryBytes, node.MemoryBytes),
		WallTime:    policy.Some(node.WallTime),
	}
	if capsule.CPUFuel.Set {
		g.CPUFuel = min(g.CPUFuel, capsule.CPUFuel.Value)
	}
	if deployment.CPUFuel.Set {
		g.CPUFuel = min(g.CPUFuel, deployment.CPUFuel.Value)
	}
	if capsule.MemoryBytes.Set {
		g.MemoryBytes = min(g.MemoryBytes, capsule.MemoryBytes.Value)
	}
	if deployment.MemoryBytes.Set {
		g.MemoryBytes = min(g.MemoryBytes, deployment.MemoryBytes.Value)
	}
	for _, w := range [...]policy.Optional[time.Duration]{req.WallTime, capsule.WallTime, deployment.WallTime} {
		if w.Set && w.Value < g.WallTime.Value {
			g.WallTime.Value = max(w.Value, 0)
		}
	}
	return g
}

// selectCell is step 9: the smallest configured class that is memory-,
// threading- and feature-compatible and permitted by both the tenant and
// the trust class. Extra-large therefore needs both to list it.
func (pr *LocalQuotaProvider) selectCell(memory uint64, threading policy.Threading, features policy.FeatureSet,
	tenantCells, trustCells policy.CellClassSet) (policy.CellClass, *rejection) {
	var compatible policy.CellClassSet
	for i := range pr.cells {
		cl := &pr.cells[i]
		if cl.Configured && cl.MemoryBytes >= memory && cl.Threading.Has(threading) && features&^cl.Features == 0 {
			compatible = compatible.With(policy.CellClass(i))
		}
	}
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
	for i := 0; i < policy.NumCellClasses; i++ {
		if permitted.Has(policy.CellClass(i)) {
			return policy.CellClass(i), nil
		}
	}
	return 0, errNoCompatibleCell
}
