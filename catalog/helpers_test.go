package catalog

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

// goodFile is the sample catalog shared with admissionctl's tests.
func goodFile(t testing.TB) File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "catalog", "good.json"))
	require.NoError(t, err)
	f, err := DecodeCatalogFile(data, true)
	require.NoError(t, err, "good.json")
	return f
}

func samplePolicy() policy.RevisionPolicy {
	return policy.RevisionPolicy{
		TrustClass:        "standard",
		Backend:           "wasm",
		Threading:         policy.SingleThreaded,
		StateModel:        "stateless",
		Features:          []string{"simd"},
		CallDepthLimit:    4,
		CapsuleCeiling:    policy.Ceiling{CPUFuel: policy.Some[uint64](2_000_000_000), MemoryBytes: policy.Some[uint64](64 << 20)},
		DeploymentCeiling: policy.Ceiling{WallTime: policy.Some(5 * time.Second)},
		Placement:         policy.PlacementRestriction{Architectures: []string{"x86_64"}},
	}
}

// weighted returns a deployment of (tenant, service) with one route
// "resize" whose revisions have the given weights, each a distinct release.
func weighted(tenant, service string, weights ...uint64) Deployment {
	rt := Route{Name: "resize", Contract: "img.v1", Function: "resize"}
	for i, w := range weights {
		rt.Revisions = append(rt.Revisions, Revision{
			Release: Release{ArtifactDigest: "sha256:0" + string(rune('a'+i)), Version: "1." + string(rune('0'+i)) + ".0"},
			Weight:  w,
			Policy:  samplePolicy(),
		})
	}
	return Deployment{Tenant: tenant, Service: service, Routes: []Route{rt}}
}

func mustDeploy(t testing.TB, c *Catalog, d Deployment) uint64 {
	t.Helper()
	g, err := c.Deploy(d)
	require.NoError(t, err, "Deploy(%s/%s)", d.Tenant, d.Service)
	return g
}

func mustResolve(t testing.TB, p *Pin, target Target, key string) *policy.ResolvedRevision {
	t.Helper()
	rev, _, err := p.Resolve(target, key)
	require.NoError(t, err, "Resolve(%v, %q)", target, key)
	return rev
}

// view is everything a pin answers, for comparing two pins.
type view struct {
	Generation  uint64
	Usage       CapacityUse
	Deployments map[DeploymentKey]Deployment
	Generations map[DeploymentKey]uint64
	Resolved    map[string]*policy.ResolvedRevision
	Policies    map[string]policy.RevisionPolicy
}

// snapshotView resolves every route of every deployment for a spread of
// keys and records the typed policy of each result.
func snapshotView(t testing.TB, p *Pin) view {
	t.Helper()
	v := view{
		Generation:  p.Generation(),
		Usage:       p.CapacityUse(),
		Deployments: map[DeploymentKey]Deployment{},
		Generations: map[DeploymentKey]uint64{},
		Resolved:    map[string]*policy.ResolvedRevision{},
		Policies:    map[string]policy.RevisionPolicy{},
	}
	for _, ts := range p.Deployments() {
		d, g, ok := p.Deployment(ts.Tenant, ts.Service)
		if !ok {
			t.Fatalf("listed deployment %v missing", ts)
		}
		v.Deployments[ts] = d
		v.Generations[ts] = g
		for _, rt := range d.Routes {
			target := Target{Tenant: ts.Tenant, Service: ts.Service, Route: rt.Name}
			for k := range 64 {
				key := target.Tenant + "/" + target.Service + "/" + target.Route + "/" + string(rune('A'+k))
				rev, _, err := p.Resolve(target, key)
				if err != nil {
					v.Resolved[key] = nil
					continue
				}
				v.Resolved[key] = rev
				pol, ok := p.RevisionPolicy(rev)
				if !ok {
					t.Fatalf("a pin rejects its own resolution %+v", rev)
				}
				v.Policies[key] = *pol
			}
		}
	}
	return v
}

func equalViews(a, b view) bool { return reflect.DeepEqual(a, b) }
