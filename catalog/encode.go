package catalog

import (
	"encoding/json"
	"time"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// EncodeFile returns the JSON form of a catalog file
// (docs/catalog-format.md), compact and deterministic: deployments, routes
// and revisions in f's order, the keys of each object in a fixed order.
// It is the inverse of [DecodeCatalogFile]: a File that decodes without
// error encodes to data that decodes back to an equal File. A nil string
// list encodes as [], which decodes as an empty list.
//
// Names are encoded as they are; whether they are valid is the decoder's
// to say. The error, if any, is a [latent.dev/admission/problems.List]
// naming, by its JSON path, every value that JSON form cannot hold: a
// threading other than single or multi, a set wall time that is negative
// or not a whole number of milliseconds.
func EncodeFile(f File) ([]byte, error) {
	var e encoder
	out := fileJSON{
		Capacity:    capacityJSON{MaxRevisions: f.Capacity.MaxRevisions, MaxPolicyBytes: f.Capacity.MaxPolicyBytes},
		Deployments: make([]deploymentJSON, len(f.Deployments)),
	}
	for i, d := range f.Deployments {
		out.Deployments[i] = e.deployment(strictjson.Index("deployments", i), d)
	}
	return e.marshal(out)
}

// EncodeDeployment returns the JSON form of one deployment, as
// [ValidateDeployment] and a deploy request take it, by the rules of
// [EncodeFile]; error paths are relative to the deployment.
func EncodeDeployment(d Deployment) ([]byte, error) {
	var e encoder
	return e.marshal(e.deployment("", d))
}

// The JSON form. Struct fields marshal in declaration order, which is the
// order of the format's tables, so the output is deterministic.
type (
	fileJSON struct {
		Capacity    capacityJSON     `json:"capacity"`
		Deployments []deploymentJSON `json:"deployments"`
	}
	capacityJSON struct {
		MaxRevisions   uint64 `json:"max_revisions"`
		MaxPolicyBytes uint64 `json:"max_policy_bytes"`
	}
	deploymentJSON struct {
		Tenant  string      `json:"tenant"`
		Service string      `json:"service"`
		Routes  []routeJSON `json:"routes"`
	}
	routeJSON struct {
		Route     string         `json:"route"`
		Contract  string         `json:"contract"`
		Function  string         `json:"function"`
		Revisions []revisionJSON `json:"revisions"`
	}
	revisionJSON struct {
		Release releaseJSON `json:"release"`
		Weight  uint64      `json:"weight"`
		Policy  policyJSON  `json:"policy"`
	}
	releaseJSON struct {
		ArtifactDigest string `json:"artifact_digest"`
		Version        string `json:"version"`
	}
	policyJSON struct {
		TrustClass        string        `json:"trust_class"`
		Backend           string        `json:"backend"`
		Threading         string        `json:"threading"`
		StateModel        string        `json:"state_model"`
		Features          []string      `json:"features"`
		CallDepthLimit    uint32        `json:"call_depth_limit"`
		CapsuleCeiling    ceilingJSON   `json:"capsule_ceiling"`
		DeploymentCeiling ceilingJSON   `json:"deployment_ceiling"`
		Placement         placementJSON `json:"placement"`
	}
	// A nil dimension is left out: no limit at this layer. A pointer, not
	// omitempty on a number, because a limit of 0 must be written.
	ceilingJSON struct {
		CPUFuel     *uint64 `json:"cpu_fuel,omitempty"`
		MemoryBytes *uint64 `json:"memory_bytes,omitempty"`
		WallTimeMS  *uint64 `json:"wall_time_ms,omitempty"`
	}
	placementJSON struct {
		Architectures []string `json:"architectures"`
		Regions       []string `json:"regions"`
		Zones         []string `json:"zones"`
	}
)

// encoder collects every value the JSON form cannot hold, so one call
// reports them all, as the decoder does.
type encoder struct {
	problems strictjson.Problems
}

func (e *encoder) problem(path, message string) {
	e.problems = append(e.problems, strictjson.Problem{Path: path, Message: message})
}

func (e *encoder) marshal(v any) ([]byte, error) {
	if len(e.problems) > 0 {
		return nil, e.problems
	}
	return json.Marshal(v)
}

func (e *encoder) deployment(path string, d Deployment) deploymentJSON {
	out := deploymentJSON{Tenant: d.Tenant, Service: d.Service, Routes: make([]routeJSON, len(d.Routes))}
	for i, rt := range d.Routes {
		rp := strictjson.Index(strictjson.JoinKey(path, "routes"), i)
		r := routeJSON{Route: rt.Name, Contract: rt.Contract, Function: rt.Function, Revisions: make([]revisionJSON, len(rt.Revisions))}
		for j, rev := range rt.Revisions {
			r.Revisions[j] = revisionJSON{
				Release: releaseJSON{ArtifactDigest: rev.Release.ArtifactDigest, Version: rev.Release.Version},
				Weight:  rev.Weight,
				Policy:  e.policy(strictjson.Index(rp+".revisions", j)+".policy", rev.Policy),
			}
		}
		out.Routes[i] = r
	}
	return out
}

func (e *encoder) policy(path string, p policy.RevisionPolicy) policyJSON {
	// Threading's String names an invalid model too, but the decoder
	// would refuse that name; refuse it here, where the caller can tell.
	if p.Threading != policy.SingleThreaded && p.Threading != policy.MultiThreaded {
		e.problem(path+".threading", "must be single or multi")
	}
	return policyJSON{
		TrustClass:        p.TrustClass,
		Backend:           p.Backend,
		Threading:         p.Threading.String(),
		StateModel:        p.StateModel,
		Features:          list(p.Features),
		CallDepthLimit:    p.CallDepthLimit,
		CapsuleCeiling:    e.ceiling(path+".capsule_ceiling", p.CapsuleCeiling),
		DeploymentCeiling: e.ceiling(path+".deployment_ceiling", p.DeploymentCeiling),
		Placement: placementJSON{
			Architectures: list(p.Placement.Architectures),
			Regions:       list(p.Placement.Regions),
			Zones:         list(p.Placement.Zones),
		},
	}
}

func (e *encoder) ceiling(path string, c policy.Ceiling) ceilingJSON {
	var out ceilingJSON
	if c.CPUFuel.Set {
		out.CPUFuel = &c.CPUFuel.Value
	}
	if c.MemoryBytes.Set {
		out.MemoryBytes = &c.MemoryBytes.Value
	}
	if w := c.WallTime; w.Set {
		// The file holds whole milliseconds (strictjson's Millis); rounding
		// would make the decoded ceiling differ from the one encoded.
		switch {
		case w.Value < 0:
			e.problem(path+".wall_time_ms", "must not be negative")
		case w.Value%time.Millisecond != 0:
			e.problem(path+".wall_time_ms", "is not a whole number of milliseconds ("+w.Value.String()+")")
		default:
			ms := uint64(w.Value / time.Millisecond)
			out.WallTimeMS = &ms
		}
	}
	return out
}

// list returns l, or an empty list for nil: the format requires every
// list, and json.Marshal writes a nil slice as null.
func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
