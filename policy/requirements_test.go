package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

// baseRevision is a revision every class with simd can run on the valid
// policy's node: it meets every requirement.
func baseRevision() *policy.RevisionPolicy {
	return &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded,
		StateModel: "stateless", Features: []string{"simd"},
		Placement: policy.PlacementRestriction{Architectures: []string{"x86_64"}, Regions: []string{"eu-west"}, Zones: []string{"eu-west-1a"}}}
}

func cells(cs ...policy.CellClass) policy.CellClassSet {
	var s policy.CellClassSet
	for _, c := range cs {
		s = s.With(c)
	}
	return s
}

// TestRequirementsOfEachRevision: each requirement the node does not
// meet is named, the first in checking order when several are unmet;
// a revision it meets gets its features as the node's bits and the
// configured classes that can run it; the tenant's and trust class's
// IDs are found by name, or reported unknown.
func TestRequirementsOfEachRevision(t *testing.T) {
	c, err := policy.Compile(decodeValid(t))
	require.NoError(t, err)
	simd, _ := c.Feature("simd")
	threads, _ := c.Feature("threads")
	acme, _ := c.TenantID("acme")
	globex, _ := c.TenantID("globex")
	standard, _ := c.TrustClassID("standard")
	privileged, _ := c.TrustClassID("privileged")
	for _, tc := range []struct {
		name     string
		tenant   string
		edit     func(r *policy.RevisionPolicy)
		unmet    policy.Requirement
		features policy.FeatureSet
		cells    policy.CellClassSet
	}{
		{"met", "acme", func(r *policy.RevisionPolicy) {}, policy.RequirementsMet, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
		{"no features", "acme", func(r *policy.RevisionPolicy) { r.Features = nil }, policy.RequirementsMet, 0, cells(policy.Tiny, policy.Small, policy.Standard, policy.ExtraLarge)},
		{"multi-threaded", "acme", func(r *policy.RevisionPolicy) { r.Threading, r.Features = policy.MultiThreaded, nil }, policy.RequirementsMet, 0, cells(policy.Standard, policy.ExtraLarge)},
		{"two features", "globex", func(r *policy.RevisionPolicy) { r.Features = []string{"threads", "simd"} }, policy.RequirementsMet, simd | threads, cells(policy.ExtraLarge)},
		{"no placement restriction", "acme", func(r *policy.RevisionPolicy) { r.Placement = policy.PlacementRestriction{} }, policy.RequirementsMet, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
		{"one of the regions", "acme", func(r *policy.RevisionPolicy) { r.Placement.Regions = []string{"us-east", "eu-west"} }, policy.RequirementsMet, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
		{"backend", "acme", func(r *policy.RevisionPolicy) { r.Backend, r.StateModel = "jvm", "durable" }, policy.RequiresBackend, 0, 0},
		{"state model", "acme", func(r *policy.RevisionPolicy) { r.StateModel, r.Threading = "durable", 0 }, policy.RequiresStateModel, 0, 0},
		{"threading", "acme", func(r *policy.RevisionPolicy) { r.Threading, r.Features = 0, []string{"gpu"} }, policy.RequiresThreading, 0, 0},
		{"features", "acme", func(r *policy.RevisionPolicy) {
			r.Features = []string{"simd", "gpu"}
			r.Placement.Architectures = []string{"riscv"}
		}, policy.RequiresFeatures, simd, 0},
		{"architecture", "acme", func(r *policy.RevisionPolicy) {
			r.Placement.Architectures, r.Placement.Regions = []string{"riscv"}, []string{"nowhere"}
		}, policy.RequiresArchitecture, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
		{"region", "acme", func(r *policy.RevisionPolicy) {
			r.Placement.Regions, r.Placement.Zones = []string{"nowhere"}, []string{"z"}
		}, policy.RequiresRegion, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
		{"zone", "acme", func(r *policy.RevisionPolicy) { r.Placement.Zones = []string{"eu-west-1b"} }, policy.RequiresZone, simd, cells(policy.Small, policy.Standard, policy.ExtraLarge)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := baseRevision()
			tc.edit(rev)
			got := c.Requirements(tc.tenant, rev)
			assert.Equal(t, tc.unmet, got.Unmet)
			assert.Equal(t, tc.features, got.Features)
			if tc.unmet == policy.RequirementsMet || tc.unmet > policy.RequiresFeatures {
				assert.Equal(t, tc.cells, got.Cells)
			}
			wantTenant := acme
			if tc.tenant == "globex" {
				wantTenant = globex
			}
			assert.True(t, got.TenantKnown)
			assert.Equal(t, wantTenant, got.Tenant)
			assert.True(t, got.TrustKnown)
			assert.Equal(t, standard, got.Trust)
			assert.True(t, got.TrustPermitted, "both tenants permit standard")
		})
	}
	rev := baseRevision()
	rev.TrustClass = "privileged"
	got := c.Requirements("nobody", rev)
	assert.False(t, got.TenantKnown, "an unknown tenant")
	assert.True(t, got.TrustKnown)
	assert.Equal(t, privileged, got.Trust)
	assert.False(t, got.TrustPermitted, "an unknown tenant permits nothing")
	assert.False(t, c.Requirements("acme", rev).TrustPermitted, "acme lists only standard")
	assert.True(t, c.Requirements("globex", rev).TrustPermitted, "globex lists privileged")
	rev.TrustClass = "unknown"
	got = c.Requirements("acme", rev)
	assert.False(t, got.TrustKnown, "an unknown trust class")
	assert.False(t, got.TrustPermitted, "an unknown trust class is not permitted")
}

// TestThreadingOnlyConfiguredClassesOffer: a node whose configured
// classes are all single-threaded does not meet a multi-threaded
// revision.
func TestThreadingOnlyConfiguredClassesOffer(t *testing.T) {
	p := decodeValid(t)
	for i := range p.CellClasses {
		p.CellClasses[i].Threading = []string{"single"}
	}
	c, err := policy.Compile(p)
	require.NoError(t, err)
	rev := baseRevision()
	rev.Threading, rev.Features = policy.MultiThreaded, nil
	assert.Equal(t, policy.RequiresThreading, c.Requirements("acme", rev).Unmet)
}

// TestRecordSlotKeepsOnePolicysRequirements: a slot derives on its first
// read and keeps them, a later read of the same policy returns the kept
// ones without allocating, and another policy's read replaces them with
// its own.
func TestRecordSlotKeepsOnePolicysRequirements(t *testing.T) {
	c, err := policy.Compile(decodeValid(t))
	require.NoError(t, err)
	other := decodeValid(t)
	other.Node.Backends = []string{"jvm"}
	d, err := policy.Compile(other)
	require.NoError(t, err)
	rev := baseRevision()
	var slot policy.RecordSlot
	first := slot.For(c, "acme", rev)
	assert.Equal(t, c.Requirements("acme", rev), *first)
	assert.Same(t, first, slot.For(c, "acme", rev), "a kept read derives again")
	assert.Zero(t, testing.AllocsPerRun(100, func() { slot.For(c, "acme", rev) }))
	theirs := slot.For(d, "acme", rev)
	assert.Equal(t, policy.RequiresBackend, theirs.Unmet)
	assert.Equal(t, d.Requirements("acme", rev), *theirs)
	mine := slot.For(c, "acme", rev)
	assert.NotSame(t, first, mine, "another policy's requirements were taken for c's")
	assert.Equal(t, policy.RequirementsMet, mine.Unmet)
}
