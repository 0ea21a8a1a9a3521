package catalog

import (
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"latent.dev/admission/policy"
	"latent.dev/admission/problems"
)

func TestEncodeFileRoundTripsGoodFile(t *testing.T) {
	f := goodFile(t)
	data, err := EncodeFile(f)
	require.NoError(t, err)
	back, err := DecodeCatalogFile(data, true)
	require.NoError(t, err, "%s", data)
	assert.Equal(t, f, back)

	again, err := EncodeFile(back)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "the encoding is deterministic")
	assert.True(t, json.Valid(data))
	assert.NotContains(t, string(data), "\n", "the encoding is compact")
}

func TestEncodeFileRoundTripsGeneratedFiles(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := genFile().Draw(t, "file")
		data, err := EncodeFile(f)
		require.NoError(t, err)
		back, err := DecodeCatalogFile(data, true)
		require.NoError(t, err, "%s", data)
		assert.Equal(t, f, back)
	})
}

func TestEncodeDeploymentRoundTrips(t *testing.T) {
	for i, d := range goodFile(t).Deployments {
		data, err := EncodeDeployment(d)
		require.NoError(t, err)
		back, err := ValidateDeployment(data, nil)
		require.NoError(t, err, "deployments[%d]: %s", i, data)
		assert.Equal(t, d, back)
	}
}

func TestEncodeWritesEmptyListsAndOmitsUnsetDimensions(t *testing.T) {
	d := weighted("acme", "thumbs", 1)
	p := &d.Routes[0].Revisions[0].Policy
	p.Features = nil
	p.Placement = policy.PlacementRestriction{}
	p.CapsuleCeiling = policy.Ceiling{CPUFuel: policy.Some[uint64](0)}
	p.DeploymentCeiling = policy.Ceiling{MemoryBytes: policy.Optional[uint64]{Value: 7}}
	data, err := EncodeDeployment(d)
	require.NoError(t, err)
	s := string(data)
	assert.Contains(t, s, `"features":[]`)
	assert.Contains(t, s, `"placement":{"architectures":[],"regions":[],"zones":[]}`)
	assert.Contains(t, s, `"capsule_ceiling":{"cpu_fuel":0}`, "a set limit of 0 is written")
	assert.Contains(t, s, `"deployment_ceiling":{}`, "an unset limit is left out")
	assert.NotContains(t, s, "null")

	data, err = EncodeFile(File{})
	require.NoError(t, err)
	assert.JSONEq(t, `{"capacity":{"max_revisions":0,"max_policy_bytes":0},"deployments":[]}`, string(data))
}

func TestEncodeRefusesWhatTheFormatCannotHold(t *testing.T) {
	f := File{Capacity: GenerousCapacity, Deployments: []Deployment{
		weighted("acme", "thumbs", 1),
		weighted("acme", "crop", 1, 2),
	}}
	f.Deployments[1].Routes[0].Revisions[1].Policy.CapsuleCeiling.WallTime = policy.Some(1500 * time.Microsecond)
	f.Deployments[1].Routes[0].Revisions[1].Policy.DeploymentCeiling.WallTime = policy.Some(-time.Second)
	f.Deployments[0].Routes[0].Revisions[0].Policy.Threading = 0
	// Only a set wall time is encoded, so only a set one is checked.
	f.Deployments[0].Routes[0].Revisions[0].Policy.CapsuleCeiling.WallTime = policy.Optional[time.Duration]{Value: time.Nanosecond}

	data, err := EncodeFile(f)
	assert.Nil(t, data)
	var ps problems.List
	require.ErrorAs(t, err, &ps)
	assert.Equal(t, problems.List{
		{Path: "deployments[0].routes[0].revisions[0].policy.threading", Message: "must be single or multi"},
		{Path: "deployments[1].routes[0].revisions[1].policy.capsule_ceiling.wall_time_ms", Message: "is not a whole number of milliseconds (1.5ms)"},
		{Path: "deployments[1].routes[0].revisions[1].policy.deployment_ceiling.wall_time_ms", Message: "must not be negative"},
	}, ps)

	_, err = EncodeDeployment(f.Deployments[1])
	require.ErrorAs(t, err, &ps)
	require.Len(t, ps, 2)
	assert.Equal(t, "routes[0].revisions[1].policy.capsule_ceiling.wall_time_ms", ps[0].Path)
}

// genFile generates catalog files that DecodeCatalogFile accepts, in the
// form it returns them (lists never nil, unset limits zero).
func genFile() *rapid.Generator[File] {
	return rapid.Custom(func(t *rapid.T) File {
		return File{
			// Far above what three deployments of three routes of three
			// small revisions take, so the capacity check always passes.
			Capacity: Capacity{
				MaxRevisions:   rapid.Uint64Min(27).Draw(t, "max_revisions"),
				MaxPolicyBytes: rapid.Uint64Min(1<<20).Draw(t, "max_policy_bytes"),
			},
			Deployments: rapid.SliceOfNDistinct(genDeployment(), 1, 3, func(d Deployment) DeploymentKey {
				return DeploymentKey{d.Tenant, d.Service}
			}).Draw(t, "deployments"),
		}
	})
}

func genDeployment() *rapid.Generator[Deployment] {
	return rapid.Custom(func(t *rapid.T) Deployment {
		return Deployment{
			Tenant:  genName().Draw(t, "tenant"),
			Service: genName().Draw(t, "service"),
			Routes:  rapid.SliceOfNDistinct(genRoute(), 1, 3, func(r Route) string { return r.Name }).Draw(t, "routes"),
		}
	})
}

func genRoute() *rapid.Generator[Route] {
	return rapid.Custom(func(t *rapid.T) Route {
		return Route{
			Name:     genName().Draw(t, "route"),
			Contract: genName().Draw(t, "contract"),
			Function: genName().Draw(t, "function"),
			// Distinct releases make distinct revisions whatever the
			// policies; a third of MaxUint64 each keeps the sum in range.
			Revisions: rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) Revision {
				return Revision{
					Release: Release{ArtifactDigest: genName().Draw(t, "artifact_digest"), Version: genName().Draw(t, "version")},
					Weight:  rapid.Uint64Max(math.MaxUint64/3).Draw(t, "weight"),
					Policy:  genPolicy().Draw(t, "policy"),
				}
			}), 1, 3, func(r Revision) Release { return r.Release }).Draw(t, "revisions"),
		}
	})
}

func genPolicy() *rapid.Generator[policy.RevisionPolicy] {
	return rapid.Custom(func(t *rapid.T) policy.RevisionPolicy {
		return policy.RevisionPolicy{
			TrustClass:        genName().Draw(t, "trust_class"),
			Backend:           genName().Draw(t, "backend"),
			Threading:         rapid.SampledFrom([]policy.Threading{policy.SingleThreaded, policy.MultiThreaded}).Draw(t, "threading"),
			StateModel:        genName().Draw(t, "state_model"),
			Features:          genNames().Draw(t, "features"),
			CallDepthLimit:    rapid.Uint32().Draw(t, "call_depth_limit"),
			CapsuleCeiling:    genCeiling().Draw(t, "capsule_ceiling"),
			DeploymentCeiling: genCeiling().Draw(t, "deployment_ceiling"),
			Placement: policy.PlacementRestriction{
				Architectures: genNames().Draw(t, "architectures"),
				Regions:       genNames().Draw(t, "regions"),
				Zones:         genNames().Draw(t, "zones"),
			},
		}
	})
}

func genCeiling() *rapid.Generator[policy.Ceiling] {
	return rapid.Custom(func(t *rapid.T) policy.Ceiling {
		var c policy.Ceiling
		if rapid.Bool().Draw(t, "cpu_fuel_set") {
			c.CPUFuel = policy.Some(rapid.Uint64().Draw(t, "cpu_fuel"))
		}
		if rapid.Bool().Draw(t, "memory_bytes_set") {
			c.MemoryBytes = policy.Some(rapid.Uint64().Draw(t, "memory_bytes"))
		}
		if rapid.Bool().Draw(t, "wall_time_set") {
			ms := rapid.Int64Range(0, math.MaxInt64/int64(time.Millisecond)).Draw(t, "wall_time_ms")
			c.WallTime = policy.Some(time.Duration(ms) * time.Millisecond)
		}
		return c
	})
}

// genName generates identifiers, with characters JSON must escape or
// encoding/json escapes anyway, and some beyond ASCII.
func genName() *rapid.Generator[string] {
	r := rapid.RuneFrom([]rune(`"\<>&/:.-_`), unicode.Latin, unicode.Han, unicode.Nd)
	return rapid.StringOfN(r, 1, 12, -1).Filter(func(s string) bool { return policy.ValidIdentifier(s, MaxNameBytes) })
}

// genNames generates a list of distinct identifiers, possibly empty.
func genNames() *rapid.Generator[[]string] {
	return rapid.SliceOfNDistinct(genName(), 0, 3, rapid.ID[string])
}
