package catalog

import (
	"math"
	"slices"
	"strings"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// problemSink records one problem at a JSON path.
type problemSink func(path, format string, args ...any)

// validateDeployment checks every rule a deployment must obey on its own,
// reporting each problem under prefix ("" for a deployment handed to
// Deploy, "deployments[3]" inside a catalog file).
func validateDeployment(d *Deployment, prefix string, report problemSink) {
	identifier(report, strictjson.JoinKey(prefix, "tenant"), d.Tenant)
	identifier(report, strictjson.JoinKey(prefix, "service"), d.Service)
	routesPath := strictjson.JoinKey(prefix, "routes")
	if len(d.Routes) == 0 {
		report(routesPath, "must list at least one route")
	}
	seen := make(map[string]int, len(d.Routes))
	for i := range d.Routes {
		rt := &d.Routes[i]
		path := strictjson.Index(routesPath, i)
		identifier(report, path+".route", rt.Name)
		identifier(report, path+".contract", rt.Contract)
		identifier(report, path+".function", rt.Function)
		if first, dup := seen[rt.Name]; dup {
			report(path+".route", "duplicates %s", strictjson.Index(routesPath, first))
		} else {
			seen[rt.Name] = i
		}
		validateRevisions(d, rt, path+".revisions", report)
	}
}

func validateRevisions(d *Deployment, rt *Route, path string, report problemSink) {
	if len(rt.Revisions) == 0 {
		report(path, "must list at least one revision")
	}
	var total uint64
	overflow := false
	ids := make(map[string]int, len(rt.Revisions))
	for i := range rt.Revisions {
		rev := &rt.Revisions[i]
		rp := strictjson.Index(path, i)
		if total > math.MaxUint64-rev.Weight {
			overflow = true
		}
		total += rev.Weight
		identifier(report, rp+".release.artifact_digest", rev.Release.ArtifactDigest)
		identifier(report, rp+".release.version", rev.Release.Version)
		validatePolicy(&rev.Policy, rp+".policy", report)
		n := normalizeRevision(*rev)
		id := revisionID(d.Tenant, d.Service, rt, ReleaseID(n.Release), &n)
		if first, dup := ids[id]; dup {
			report(rp, "duplicates %s (same release and policy)", strictjson.Index(path, first))
		} else {
			ids[id] = i
		}
	}
	if overflow {
		report(path, "weights sum to more than %d", uint64(math.MaxUint64))
	}
}

func validatePolicy(p *policy.RevisionPolicy, path string, report problemSink) {
	identifier(report, path+".trust_class", p.TrustClass)
	identifier(report, path+".backend", p.Backend)
	identifier(report, path+".state_model", p.StateModel)
	if p.Threading != policy.SingleThreaded && p.Threading != policy.MultiThreaded {
		report(path+".threading", "must be single or multi")
	}
	policyList(report, path+".features", p.Features)
	policyList(report, path+".placement.architectures", p.Placement.Architectures)
	policyList(report, path+".placement.regions", p.Placement.Regions)
	policyList(report, path+".placement.zones", p.Placement.Zones)
	// A file cannot express these; a Go caller can.
	if p.CapsuleCeiling.WallTime.Value < 0 {
		report(path+".capsule_ceiling.wall_time_ms", "must not be negative")
	}
	if p.DeploymentCeiling.WallTime.Value < 0 {
		report(path+".deployment_ceiling.wall_time_ms", "must not be negative")
	}
}

// MaxPolicyListEntries bounds each list of a revision policy (features,
// placement architectures, regions and zones). A revision is stored as one
// record, and a store record holds at most 16 MiB: with this bound even a
// revision whose four lists are full of names of [MaxNameBytes] fits, so
// a deployment that validates can always be stored.
const MaxPolicyListEntries = 8192

// policyList checks one list of a revision policy: at most
// MaxPolicyListEntries identifiers, each once. A list over the bound is
// reported once, at its own path, and its entries are not checked.
func policyList(report problemSink, path string, list []string) {
	if len(list) > MaxPolicyListEntries {
		report(path, "lists more than %d entries", MaxPolicyListEntries)
		return
	}
	uniqueIdentifiers(report, path, list)
}

func identifier(report problemSink, path, s string) {
	if !policy.ValidIdentifier(s, MaxNameBytes) {
		report(path, "is not a valid identifier (1 to %d bytes of UTF-8 without white space or control characters)", MaxNameBytes)
	}
}

func uniqueIdentifiers(report problemSink, path string, list []string) {
	seen := make(map[string]int, len(list))
	for i, s := range list {
		ip := strictjson.Index(path, i)
		identifier(report, ip, s)
		if first, dup := seen[s]; dup {
			report(ip, "duplicates %s", strictjson.Index(path, first))
		} else {
			seen[s] = i
		}
	}
}

// normalizeRevision returns a copy that shares no memory with r, with the
// set-like lists sorted and empty ones nil, and absent limits zeroed, so
// equal policies have one encoding and one identity.
func normalizeRevision(r Revision) Revision {
	p := &r.Policy
	p.Features = sortedCopy(p.Features)
	p.Placement.Architectures = sortedCopy(p.Placement.Architectures)
	p.Placement.Regions = sortedCopy(p.Placement.Regions)
	p.Placement.Zones = sortedCopy(p.Placement.Zones)
	p.CapsuleCeiling = normalizeCeiling(p.CapsuleCeiling)
	p.DeploymentCeiling = normalizeCeiling(p.DeploymentCeiling)
	return r
}

func sortedCopy(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	out := slices.Clone(list)
	slices.SortFunc(out, strings.Compare)
	return out
}

func normalizeCeiling(c policy.Ceiling) policy.Ceiling {
	if !c.CPUFuel.Set {
		c.CPUFuel.Value = 0
	}
	if !c.MemoryBytes.Set {
		c.MemoryBytes.Value = 0
	}
	if !c.WallTime.Set {
		c.WallTime.Value = 0
	}
	return c
}

// covered reports whether a problem at path repeats one already reported
// at path or at an enclosing path (a missing key hides the rule it breaks).
func covered(path string, earlier strictjson.Problems) bool {
	for _, e := range earlier {
		if e.Path == "" || path == e.Path ||
			(strings.HasPrefix(path, e.Path) && (path[len(e.Path)] == '.' || path[len(e.Path)] == '[')) {
			return true
		}
	}
	return false
}
