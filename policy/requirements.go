package policy

import (
	"slices"
	"sync/atomic"
)

// Requirement names one of a revision's execution requirements that a
// node may not meet: admission's step 6 checks them in this order.
type Requirement uint8

// The requirements, in checking order. RequirementsMet is none: the node
// meets them all.
const (
	RequirementsMet Requirement = iota
	RequiresBackend
	RequiresStateModel
	RequiresThreading
	RequiresFeatures
	RequiresArchitecture
	RequiresRegion
	RequiresZone
)

// Requirements is what a compiled node policy derives from one revision
// alone: its tenant's and trust class's IDs, the first execution
// requirement the node does not meet, its features as a bitset of the
// node's, and the configured cell classes that can run it. A revision
// never changes, and neither does a compiled policy, so admission derives
// them once per catalog record ([RecordSlot]) instead of comparing a
// dozen names and hashing the tenant's on every request.
type Requirements struct {
	policy *Compiled // derived under; see RecordSlot.For
	// Unmet is the first requirement the node does not meet.
	Unmet Requirement
	// Features is the revision's features as the node's bits; valid
	// unless Unmet is RequiresFeatures or an earlier one.
	Features FeatureSet
	// Cells are the configured cell classes that support the revision's
	// threading model and offer all its features: step 9 then needs only
	// their memory.
	Cells       CellClassSet
	Tenant      TenantID
	TenantKnown bool // the policy has the revision's tenant, whose ID is Tenant
	Trust       TrustClassID
	TrustKnown  bool // the policy has the revision's trust class, whose ID is Trust
	// TrustPermitted is step 7's answer: the policy has both the tenant
	// and the trust class, and the tenant permits the class.
	TrustPermitted bool
}

// Requirements derives them for a revision of tenant with policy rev.
func (c *Compiled) Requirements(tenant string, rev *RevisionPolicy) Requirements {
	v := Requirements{policy: c}
	v.Tenant, v.TenantKnown = c.TenantID(tenant)
	v.Trust, v.TrustKnown = c.TrustClassID(rev.TrustClass)
	v.TrustPermitted = v.TenantKnown && v.TrustKnown && c.Tenant(v.Tenant).PermitsTrustClass(v.Trust)
	var threading ThreadingSet
	for i := range c.cells {
		if c.cells[i].Configured {
			threading |= c.cells[i].Threading
		}
	}
	switch {
	case !c.SupportsBackend(rev.Backend):
		v.Unmet = RequiresBackend
		return v
	case !c.SupportsStateModel(rev.StateModel):
		v.Unmet = RequiresStateModel
		return v
	case !threading.Has(rev.Threading):
		v.Unmet = RequiresThreading
		return v
	}
	for _, f := range rev.Features {
		bit, ok := c.Feature(f)
		if !ok {
			v.Unmet = RequiresFeatures
			return v
		}
		v.Features |= bit
	}
	for i := range c.cells {
		if cl := &c.cells[i]; cl.Configured && cl.Threading.Has(rev.Threading) && v.Features&^cl.Features == 0 {
			v.Cells = v.Cells.With(CellClass(i))
		}
	}
	place := &c.node.Placement
	pl := &rev.Placement
	switch {
	case len(pl.Architectures) > 0 && !slices.Contains(pl.Architectures, place.Architecture):
		v.Unmet = RequiresArchitecture
	case len(pl.Regions) > 0 && !slices.Contains(pl.Regions, place.Region):
		v.Unmet = RequiresRegion
	case len(pl.Zones) > 0 && !slices.Contains(pl.Zones, place.Zone):
		v.Unmet = RequiresZone
	}
	return v
}

// RecordSlot keeps the [Requirements] a node policy derived from one
// catalog record. A catalog keeps one beside each revision record and
// hands it to admission with the record; nothing else reads or writes it.
// The zero value is empty. It is safe for concurrent use.
type RecordSlot struct{ p atomic.Pointer[Requirements] }

// For returns the requirements of the record (a revision of tenant, with
// policy rev) under c: the kept ones when c derived them, else derived
// now and kept, replacing another policy's. Racing fills keep equal
// values; one policy per node means a slot is filled once. It allocates
// only when it fills.
func (s *RecordSlot) For(c *Compiled, tenant string, rev *RevisionPolicy) *Requirements {
	if r := s.p.Load(); r != nil && r.policy == c {
		return r
	}
	r := new(Requirements)
	*r = c.Requirements(tenant, rev)
	s.p.Store(r)
	return r
}
