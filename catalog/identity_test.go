package catalog

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

func TestIdentitiesAreValidGeneratedIdentifiers(t *testing.T) {
	f := goodFile(t)
	c, err := FromFile(f)
	require.NoError(t, err)
	pin := c.Pin()
	for _, ts := range pin.Deployments() {
		d, _, _ := pin.Deployment(ts.Tenant, ts.Service)
		for _, rt := range d.Routes {
			for _, rev := range rt.Revisions {
				for _, id := range []string{ReleaseID(rev.Release), revisionIDOf(d.Tenant, d.Service, rt, rev)} {
					assert.Len(t, id, IdentityBytes)
					assert.True(t, policy.ValidIdentifier(id, policy.MinimumGeneratedIdentifierBytes), "identity %q is not a valid generated identifier", id)
				}
			}
		}
	}
}

func TestIdentitiesAreStable(t *testing.T) {
	// Golden values (the release one checked against an independent
	// SHA-256 of the documented input): a node that restarts, or another node reading the same
	// catalog, must derive the same identities.
	d := weighted("acme", "thumbs", 1)
	rt := d.Routes[0]
	assert.Equal(t, goldenReleaseID, ReleaseID(Release{ArtifactDigest: "sha256:3f6c", Version: "1.4.2"}), "release identity")
	assert.Equal(t, goldenRevisionID, revisionIDOf("acme", "thumbs", rt, rt.Revisions[0]), "revision identity")
}

const (
	goldenReleaseID  = "rel-5bd7bd480a755c6c5b86919afa30a298d82e1941750b9bc5c3045bf7848398b2"
	goldenRevisionID = "rev-626a59c76e0abbfdd67fcb3648c7839ce31d452a4eae2833e6e193ea47b3a5af"
)

func TestRevisionIdentityCoversNamesReleaseAndPolicyButNotWeight(t *testing.T) {
	base := weighted("acme", "thumbs", 1)
	rt, rev := base.Routes[0], base.Routes[0].Revisions[0]
	id := revisionIDOf("acme", "thumbs", rt, rev)
	heavier := rev
	heavier.Weight = 99
	assert.Equal(t, id, revisionIDOf("acme", "thumbs", rt, heavier), "the weight changed the revision identity")
	reordered := rev
	reordered.Policy.Features = []string{"threads", "simd"}
	plus := rev
	plus.Policy.Features = []string{"simd", "threads"}
	assert.Equal(t, revisionIDOf("acme", "thumbs", rt, plus), revisionIDOf("acme", "thumbs", rt, reordered),
		"the order of features changed the revision identity")
	assert.NotEqual(t, id, revisionIDOf("acme", "thumbs", rt, plus), "a feature kept the revision identity")
	assert.NotEqual(t, id, revisionIDOf("globex", "thumbs", rt, rev), "the tenant kept the revision identity")
	assert.NotEqual(t, id, revisionIDOf("acme", "render", rt, rev), "the service kept the revision identity")
	for _, change := range []func(*Route){
		func(r *Route) { r.Name = "crop" },
		func(r *Route) { r.Contract = "img.v2" },
		func(r *Route) { r.Function = "crop" },
	} {
		other := rt
		change(&other)
		assert.NotEqual(t, id, revisionIDOf("acme", "thumbs", other, rev), "a route field kept the revision identity")
	}
	release := rev
	release.Release.Version = "2"
	assert.NotEqual(t, id, revisionIDOf("acme", "thumbs", rt, release), "the release kept the revision identity")
	depth := rev
	depth.Policy.CallDepthLimit = 5
	assert.NotEqual(t, id, revisionIDOf("acme", "thumbs", rt, depth), "the call depth limit kept the revision identity")
	unset := rev
	unset.Policy.DeploymentCeiling.WallTime = policy.Optional[time.Duration]{}
	assert.NotEqual(t, id, revisionIDOf("acme", "thumbs", rt, unset), "an omitted ceiling dimension kept the revision identity")
	// Field boundaries are length-prefixed: moving a byte between two
	// adjacent names is a different identity.
	assert.NotEqual(t, revisionIDOf("ab", "c", rt, rev), revisionIDOf("a", "bc", rt, rev), "tenant/service boundary is ambiguous")
}

// revisionIDOf is the identity of one revision of a route: a digest of the
// tenant, service, route, contract and function names, the release identity
// and the canonical encoding of the normalized policy. The weight is left
// out, so moving traffic between revisions keeps their identities.
func revisionIDOf(tenant, service string, route Route, rev Revision) string {
	n := normalizeRevision(rev)
	return revisionID(tenant, service, &route, ReleaseID(n.Release), &n)
}
