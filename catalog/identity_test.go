package catalog

import (
	"testing"
	"time"

	"latent.dev/admission/policy"
)

func TestIdentitiesAreValidGeneratedIdentifiers(t *testing.T) {
	f := goodFile(t)
	c, err := FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	pin := c.Pin()
	for _, ts := range pin.Deployments() {
		d, _, _ := pin.Deployment(ts.Tenant, ts.Service)
		for _, rt := range d.Routes {
			for _, rev := range rt.Revisions {
				for _, id := range []string{ReleaseID(rev.Release), RevisionID(d.Tenant, d.Service, rt, rev)} {
					if len(id) != IdentityBytes || !policy.ValidIdentifier(id, policy.MinimumGeneratedIdentifierBytes) {
						t.Fatalf("identity %q is not a valid generated identifier", id)
					}
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
	golden := map[string]string{
		"release":  ReleaseID(Release{ArtifactDigest: "sha256:3f6c", Version: "1.4.2"}),
		"revision": RevisionID("acme", "thumbs", rt, rt.Revisions[0]),
	}
	want := map[string]string{
		"release":  goldenReleaseID,
		"revision": goldenRevisionID,
	}
	for k, v := range golden {
		if v != want[k] {
			t.Errorf("%s identity = %s, want %s", k, v, want[k])
		}
	}
}

const (
	goldenReleaseID  = "rel-5bd7bd480a755c6c5b86919afa30a298d82e1941750b9bc5c3045bf7848398b2"
	goldenRevisionID = "rev-626a59c76e0abbfdd67fcb3648c7839ce31d452a4eae2833e6e193ea47b3a5af"
)

func TestRevisionIdentityCoversNamesReleaseAndPolicyButNotWeight(t *testing.T) {
	base := weighted("acme", "thumbs", 1)
	rt, rev := base.Routes[0], base.Routes[0].Revisions[0]
	id := RevisionID("acme", "thumbs", rt, rev)
	same := func(name string, got string) {
		t.Helper()
		if got != id {
			t.Errorf("%s changed the revision identity", name)
		}
	}
	differs := func(name string, got string) {
		t.Helper()
		if got == id {
			t.Errorf("%s kept the revision identity", name)
		}
	}
	heavier := rev
	heavier.Weight = 99
	same("the weight", RevisionID("acme", "thumbs", rt, heavier))
	reordered := rev
	reordered.Policy.Features = []string{"threads", "simd"}
	plus := rev
	plus.Policy.Features = []string{"simd", "threads"}
	if RevisionID("acme", "thumbs", rt, reordered) != RevisionID("acme", "thumbs", rt, plus) {
		t.Error("the order of features changed the revision identity")
	}
	differs("a feature", RevisionID("acme", "thumbs", rt, plus))
	differs("the tenant", RevisionID("globex", "thumbs", rt, rev))
	differs("the service", RevisionID("acme", "render", rt, rev))
	for _, change := range []func(*Route){
		func(r *Route) { r.Name = "crop" },
		func(r *Route) { r.Contract = "img.v2" },
		func(r *Route) { r.Function = "crop" },
	} {
		other := rt
		change(&other)
		differs("a route field", RevisionID("acme", "thumbs", other, rev))
	}
	release := rev
	release.Release.Version = "2"
	differs("the release", RevisionID("acme", "thumbs", rt, release))
	depth := rev
	depth.Policy.CallDepthLimit = 5
	differs("the call depth limit", RevisionID("acme", "thumbs", rt, depth))
	unset := rev
	unset.Policy.DeploymentCeiling.WallTime = policy.Optional[time.Duration]{}
	differs("an omitted ceiling dimension", RevisionID("acme", "thumbs", rt, unset))
	// Field boundaries are length-prefixed: moving a byte between two
	// adjacent names is a different identity.
	a := RevisionID("ab", "c", rt, rev)
	b := RevisionID("a", "bc", rt, rev)
	if a == b {
		t.Error("tenant/service boundary is ambiguous")
	}
}
