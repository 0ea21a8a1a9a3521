package catalog

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

func TestDecodeGoodFile(t *testing.T) {
	f := goodFile(t)
	assert.Equal(t, Capacity{MaxRevisions: 64, MaxPolicyBytes: 65536}, f.Capacity)
	require.Len(t, f.Deployments, 4)
	resize := f.Deployments[0].Routes[0]
	want := Revision{
		Release: Release{ArtifactDigest: resize.Revisions[0].Release.ArtifactDigest, Version: "1.4.2"},
		Weight:  100,
		Policy: policy.RevisionPolicy{
			TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
			Features: []string{"simd"}, CallDepthLimit: 4,
			CapsuleCeiling:    policy.Ceiling{CPUFuel: policy.Some[uint64](2_000_000_000), MemoryBytes: policy.Some[uint64](67108864)},
			DeploymentCeiling: policy.Ceiling{CPUFuel: policy.Some[uint64](1_000_000_000), MemoryBytes: policy.Some[uint64](33554432), WallTime: policy.Some(5 * time.Second)},
			Placement:         policy.PlacementRestriction{Architectures: []string{"x86_64"}, Regions: []string{}, Zones: []string{}},
		},
	}
	assert.Equal(t, "resize", resize.Name)
	assert.Equal(t, want, resize.Revisions[0])
}

// minimalCatalog is a valid catalog file as a tree a test can edit.
func minimalCatalog() map[string]any {
	revision := func(version string, weight any) map[string]any {
		return map[string]any{
			"release": map[string]any{"artifact_digest": "sha256:00", "version": version},
			"weight":  weight,
			"policy": map[string]any{
				"trust_class": "standard", "backend": "wasm", "threading": "single", "state_model": "stateless",
				"features": []any{"simd"}, "call_depth_limit": 4,
				"capsule_ceiling": map[string]any{}, "deployment_ceiling": map[string]any{"wall_time_ms": 5000},
				"placement": map[string]any{"architectures": []any{}, "regions": []any{}, "zones": []any{}},
			},
		}
	}
	return map[string]any{
		"capacity": map[string]any{"max_revisions": 10, "max_policy_bytes": 4096},
		"deployments": []any{map[string]any{
			"tenant": "acme", "service": "thumbs",
			"routes": []any{map[string]any{
				"route": "resize", "contract": "img.v1", "function": "resize",
				"revisions": []any{revision("1.0.0", 90), revision("1.1.0", 10)},
			}},
		}},
	}
}

func dig(tree map[string]any, path ...any) map[string]any {
	var cur any = tree
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

func TestDecodeReportsEveryProblemWithItsPath(t *testing.T) {
	route := []any{"deployments", 0, "routes", 0}
	rev0 := append(append([]any{}, route...), "revisions", 0)
	pol0 := append(append([]any{}, rev0...), "policy")
	const r0 = "deployments[0].routes[0]"
	tests := []struct {
		name            string
		edit            func(map[string]any)
		requireCapacity bool
		want            []string
	}{
		{"a valid file has no problems", func(map[string]any) {}, true, nil},
		{"an unknown key", func(m map[string]any) { dig(m, route...)["color"] = "red" }, true,
			[]string{r0 + ".color: unknown key"}},
		{"a missing key", func(m map[string]any) { delete(dig(m, route...), "contract") }, true,
			[]string{r0 + ".contract: missing"}},
		{"a wrong type", func(m map[string]any) { dig(m, rev0...)["weight"] = "ninety" }, true,
			[]string{r0 + ".revisions[0].weight: expected a non-negative whole number, got a string"}},
		{"a negative number", func(m map[string]any) { dig(m, rev0...)["weight"] = -1 }, true,
			[]string{r0 + ".revisions[0].weight: must not be negative"}},
		{"capacity is required in a store's file", func(m map[string]any) { delete(m, "capacity") }, true,
			[]string{"capacity: missing"}},
		{"capacity may be omitted in a scenario", func(m map[string]any) { delete(m, "capacity") }, false, nil},
		{"threading is single or multi", func(m map[string]any) { dig(m, pol0...)["threading"] = "many" }, true,
			[]string{r0 + ".revisions[0].policy.threading: must be single or multi"}},
		{"a call depth beyond 32 bits", func(m map[string]any) { dig(m, pol0...)["call_depth_limit"] = uint64(1) << 32 }, true,
			[]string{r0 + ".revisions[0].policy.call_depth_limit: is out of range (at most 4294967295)"}},
		{"features are unique", func(m map[string]any) { dig(m, pol0...)["features"] = []any{"simd", "simd"} }, true,
			[]string{r0 + ".revisions[0].policy.features[1]: duplicates " + r0 + ".revisions[0].policy.features[0]"}},
		{"a name is an identifier", func(m map[string]any) { dig(m, "deployments", 0)["tenant"] = "ac me" }, true,
			[]string{"deployments[0].tenant: is not a valid identifier (1 to 255 bytes of UTF-8 without white space or control characters)"}},
		{"a name is at most 255 bytes", func(m map[string]any) { dig(m, route...)["function"] = strings.Repeat("f", 256) }, true,
			[]string{r0 + ".function: is not a valid identifier (1 to 255 bytes of UTF-8 without white space or control characters)"}},
		{"route names are unique", func(m map[string]any) {
			d := dig(m, "deployments", 0)
			d["routes"] = append(d["routes"].([]any), d["routes"].([]any)[0])
		}, true, []string{"deployments[0].routes[1].route: duplicates deployments[0].routes[0]"}},
		{"a route has a revision", func(m map[string]any) { dig(m, route...)["revisions"] = []any{} }, true,
			[]string{r0 + ".revisions: must list at least one revision"}},
		{"a deployment has a route", func(m map[string]any) { dig(m, "deployments", 0)["routes"] = []any{} }, true,
			[]string{"deployments[0].routes: must list at least one route"}},
		{"revisions are distinct", func(m map[string]any) {
			dig(m, route...)["revisions"].([]any)[1].(map[string]any)["release"] = map[string]any{"artifact_digest": "sha256:00", "version": "1.0.0"}
		}, true, []string{r0 + ".revisions[1]: duplicates " + r0 + ".revisions[0] (same release and policy)"}},
		{"weights sum within 64 bits", func(m map[string]any) {
			dig(m, rev0...)["weight"] = uint64(math.MaxUint64)
		}, true, []string{r0 + ".revisions: weights sum to more than 18446744073709551615"}},
		{"deployments are unique", func(m map[string]any) {
			m["deployments"] = append(m["deployments"].([]any), m["deployments"].([]any)[0])
		}, true, []string{"deployments[1]: duplicates deployments[0] (same tenant and service)"}},
		{"deployments fit max_revisions", func(m map[string]any) { dig(m, "capacity")["max_revisions"] = 1 }, true,
			[]string{"capacity.max_revisions: the deployments hold 2 revisions, more than 1"}},
		{"deployments fit max_policy_bytes", func(m map[string]any) { dig(m, "capacity")["max_policy_bytes"] = 10 }, true,
			[]string{"capacity.max_policy_bytes: the deployments' policy records take 118 bytes, more than 10"}},
		{"every problem at once", func(m map[string]any) {
			delete(m, "capacity")
			dig(m, rev0...)["weight"] = -5
			dig(m, pol0...)["threading"] = "many"
			dig(m, pol0...)["ceiling"] = map[string]any{}
			delete(dig(m, "deployments", 0), "service")
		}, true, []string{
			"capacity: missing",
			"deployments[0].service: missing",
			r0 + ".revisions[0].weight: must not be negative",
			r0 + ".revisions[0].policy.threading: must be single or multi",
			r0 + ".revisions[0].policy.ceiling: unknown key",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tree := minimalCatalog()
			tt.edit(tree)
			data, err := json.Marshal(tree)
			require.NoError(t, err)
			f, err := DecodeCatalogFile(data, tt.requireCapacity)
			var got []string
			for _, p := range strictjson.AsProblems(err) {
				got = append(got, p.String())
			}
			require.Equal(t, tt.want, got, "problems")
			if err == nil && !tt.requireCapacity {
				assert.Equal(t, GenerousCapacity, f.Capacity, "an omitted capacity")
			}
		})
	}
}

func TestDecodeInsideALargerDocumentKeepsItsPaths(t *testing.T) {
	catalog, _ := json.Marshal(minimalCatalog())
	deployment, _ := json.Marshal(dig(minimalCatalog(), "deployments", 0))
	doc := `{"catalog": ` + string(catalog) + `, "steps": [{"deployment": ` +
		strings.Replace(string(deployment), `"threading":"single"`, `"threading":"multi","x":1`, 1) + `}]}`
	tree, problems := strictjson.Parse([]byte(doc))
	require.NotNil(t, tree, problems)
	d := strictjson.NewDecoder(problems)
	f := decodeCatalogValue(d, tree.Members[0].Value, false)
	dep := decodeDeploymentValue(d, tree.Members[1].Value.Items[0].Members[0].Value)
	want := "steps[0].deployment.routes[0].revisions[0].policy.x: unknown key"
	require.EqualError(t, d.Err(), want)
	assert.Len(t, f.Deployments, 1)
	assert.Equal(t, uint64(10), f.Capacity.MaxRevisions)
	assert.Equal(t, policy.MultiThreaded, dep.Routes[0].Revisions[0].Policy.Threading)
}
