package core

import (
	"slices"
	"sync/atomic"

	"latent.dev/admission/policy"
)

// What steps 3, 6 and 7 derive from a revision's identity and policy
// alone: the ID of its tenant under the node's policy, for step 3's
// allowlist lookup; step 6's answer (backend, state model, threading,
// features, placement against what the node offers) with the revision's
// features as a bitset; and the ID of its trust class for step 7, whose
// allowlist check depends on the tenant and is made every time. A
// revision never changes, and neither does the node's policy, so for a
// [RecordSource]'s revision it is derived once per record and provider
// and kept in the record's slot instead of comparing a dozen names and
// hashing the tenant's on every request.
type requirements struct {
	provider    *LocalQuotaProvider // the node it was derived for
	err         *rejection          // step 6's answer; nil when it passes
	features    policy.FeatureSet
	tenant      policy.TenantID
	tenantKnown bool // the node's policy has the revision's tenant, whose ID is tenant
	trust       policy.TrustClassID
	trustKnown  bool
	// cells are the configured cell classes that support the revision's
	// threading model and offer all its features: step 9 then needs only
	// the memory comparison.
	cells policy.CellClassSet
}

// deriveRequirements computes them for a revision of tenant.
func (pr *LocalQuotaProvider) deriveRequirements(tenant string, rev *policy.RevisionPolicy, v *requirements) {
	*v = requirements{provider: pr}
	v.tenant, v.tenantKnown = pr.policy.TenantID(tenant)
	v.trust, v.trustKnown = pr.policy.TrustClassID(rev.TrustClass)
	switch {
	case !pr.policy.SupportsBackend(rev.Backend):
		v.err = errBackend
		return
	case !pr.policy.SupportsStateModel(rev.StateModel):
		v.err = errStateModel
		return
	case !pr.threading.Has(rev.Threading):
		v.err = errThreading
		return
	}
	for _, f := range rev.Features {
		bit, ok := pr.policy.Feature(f)
		if !ok {
			v.err = errFeatures
			return
		}
		v.features |= bit
	}
	for i := range pr.cells {
		if cl := &pr.cells[i]; cl.Configured && cl.Threading.Has(rev.Threading) && v.features&^cl.Features == 0 {
			v.cells = v.cells.With(policy.CellClass(i))
		}
	}
	place := &pr.node.Placement
	pl := &rev.Placement
	switch {
	case len(pl.Architectures) > 0 && !slices.Contains(pl.Architectures, place.Architecture):
		v.err = errArchitecture
	case len(pl.Regions) > 0 && !slices.Contains(pl.Regions, place.Region):
		v.err = errRegion
	case len(pl.Zones) > 0 && !slices.Contains(pl.Zones, place.Zone):
		v.err = errZone
	}
}

// recordRequirements returns the requirements of a record (identity id,
// policy rev) from its slot, deriving and storing them when the slot is
// empty or holds another provider's. Two racing fills store equal
// values; one provider per node means a slot is filled once. It
// allocates only when it fills.
func (pr *LocalQuotaProvider) recordRequirements(slot *atomic.Value, id *policy.RevisionIdentity, rev *policy.RevisionPolicy) *requirements {
	loaded := slot.Load()
	held, ours := loaded.(*requirements)
	if ours && held != nil && held.provider == pr {
		return held
	}
	v := new(requirements)
	pr.deriveRequirements(id.Tenant, rev, v)
	// A slot that holds a value of another type (something besides
	// admission stored into it) is left alone, never a panic: its record
	// is derived per request.
	if loaded == nil || ours {
		slot.Store(v)
	}
	return v
}
