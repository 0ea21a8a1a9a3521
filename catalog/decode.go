package catalog

import (
	"fmt"
	"math"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// DecodeCatalogFile strictly decodes and validates a catalog file
// (docs/catalog-format.md). The error, if any, is a [latent.dev/admission/problems.List] listing every
// problem with its JSON path. A store's file requires capacity; a
// scenario's may omit it, and then gets [GenerousCapacity].
func DecodeCatalogFile(data []byte, requireCapacity bool) (File, error) {
	tree, parseProblems := strictjson.Parse(data)
	if tree == nil {
		return File{}, parseProblems
	}
	d := strictjson.NewDecoder(parseProblems)
	f := decodeCatalogValue(d, tree, requireCapacity)
	if err := d.Err(); err != nil {
		return File{}, err
	}
	return f, nil
}

// decodeCatalogValue decodes and validates an already-parsed catalog
// object (a file's root, or a scenario's "catalog"), recording every
// problem in d under v's path. A rule broken by a value that could not be
// decoded is not reported twice: the structural problem hides it.
func decodeCatalogValue(d *strictjson.Decoder, v *strictjson.Value, requireCapacity bool) File {
	local := strictjson.NewDecoder(nil)
	root := local.Object(v)
	f := File{Capacity: GenerousCapacity}
	capacityPath := strictjson.JoinKey(v.Path(), "capacity")
	if requireCapacity || root.Has("capacity") {
		co := root.Object("capacity")
		f.Capacity = Capacity{MaxRevisions: co.Uint64("max_revisions"), MaxPolicyBytes: co.Uint64("max_policy_bytes")}
		co.Done()
	} else {
		root.Optional("capacity") // marks the key as known
	}
	items := root.Array("deployments")
	for _, it := range items {
		f.Deployments = append(f.Deployments, decodeDeployment(local, it))
	}
	root.Done()

	var semantic strictjson.Problems
	sink := func(path, format string, args ...any) {
		semantic = append(semantic, strictjson.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	seen := map[DeploymentKey]int{}
	for i := range f.Deployments {
		dep := &f.Deployments[i]
		validateDeployment(dep, items[i].Path(), sink)
		if !policy.ValidIdentifier(dep.Tenant, MaxNameBytes) || !policy.ValidIdentifier(dep.Service, MaxNameBytes) {
			continue
		}
		key := DeploymentKey{dep.Tenant, dep.Service}
		if first, dup := seen[key]; dup {
			sink(items[i].Path(), "duplicates %s (same tenant and service)", items[first].Path())
		} else {
			seen[key] = i
		}
	}
	merge(d, local.Problems(), semantic)
	if len(local.Problems()) == 0 && len(semantic) == 0 {
		checkCapacity(d, capacityPath, f)
	}
	return f
}

// checkCapacity reports a file whose deployments do not fit its capacity.
func checkCapacity(d *strictjson.Decoder, path string, f File) {
	var usage CapacityUse
	for _, dep := range f.Deployments {
		for _, rt := range dep.Routes {
			for _, rev := range rt.Revisions {
				usage.Revisions++
				usage.PolicyBytes += RecordSize(rev)
			}
		}
	}
	if usage.Revisions > f.Capacity.MaxRevisions {
		d.Problemf(strictjson.JoinKey(path, "max_revisions"), "the deployments hold %d revisions, more than %d", usage.Revisions, f.Capacity.MaxRevisions)
	}
	if usage.PolicyBytes > f.Capacity.MaxPolicyBytes {
		d.Problemf(strictjson.JoinKey(path, "max_policy_bytes"), "the deployments' policy records take %d bytes, more than %d", usage.PolicyBytes, f.Capacity.MaxPolicyBytes)
	}
}

// decodeDeploymentValue decodes and validates one already-parsed
// deployment object (a scenario's deploy step), recording every problem in
// d under v's path.
func decodeDeploymentValue(d *strictjson.Decoder, v *strictjson.Value) Deployment {
	local := strictjson.NewDecoder(nil)
	dep := decodeDeployment(local, v)
	var semantic strictjson.Problems
	validateDeployment(&dep, v.Path(), func(path, format string, args ...any) {
		semantic = append(semantic, strictjson.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	})
	merge(d, local.Problems(), semantic)
	return dep
}

// merge records structural problems and the semantic ones they do not hide.
func merge(d *strictjson.Decoder, structural, semantic strictjson.Problems) {
	for _, p := range structural {
		d.Problemf(p.Path, "%s", p.Message)
	}
	for _, p := range semantic {
		if !covered(p.Path, structural) {
			d.Problemf(p.Path, "%s", p.Message)
		}
	}
}

func decodeDeployment(d *strictjson.Decoder, v *strictjson.Value) Deployment {
	o := d.Object(v)
	dep := Deployment{Tenant: o.String("tenant"), Service: o.String("service")}
	for _, rv := range o.Array("routes") {
		ro := d.Object(rv)
		rt := Route{Name: ro.String("route"), Contract: ro.String("contract"), Function: ro.String("function")}
		for _, vv := range ro.Array("revisions") {
			vo := d.Object(vv)
			rel := vo.Object("release")
			rev := Revision{Release: Release{ArtifactDigest: rel.String("artifact_digest"), Version: rel.String("version")}}
			rel.Done()
			rev.Weight = vo.Uint64("weight")
			rev.Policy = decodePolicy(d, vo.Object("policy"))
			vo.Done()
			rt.Revisions = append(rt.Revisions, rev)
		}
		ro.Done()
		dep.Routes = append(dep.Routes, rt)
	}
	o.Done()
	return dep
}

func decodePolicy(d *strictjson.Decoder, o *strictjson.Object) policy.RevisionPolicy {
	p := policy.RevisionPolicy{
		TrustClass: o.String("trust_class"),
		Backend:    o.String("backend"),
	}
	if tv, ok := o.Get("threading"); ok {
		if s, ok := d.String(tv); ok {
			if t, ok := policy.ParseThreading(s); ok {
				p.Threading = t
			} else {
				d.ProblemAt(tv, "must be single or multi")
			}
		}
	}
	p.StateModel = o.String("state_model")
	p.Features = o.Strings("features")
	p.CallDepthLimit = uint32(o.Uint64Max("call_depth_limit", math.MaxUint32))
	p.CapsuleCeiling = decodeCeiling(o.Object("capsule_ceiling"))
	p.DeploymentCeiling = decodeCeiling(o.Object("deployment_ceiling"))
	pl := o.Object("placement")
	p.Placement = policy.PlacementRestriction{
		Architectures: pl.Strings("architectures"),
		Regions:       pl.Strings("regions"),
		Zones:         pl.Strings("zones"),
	}
	pl.Done()
	o.Done()
	return p
}

// decodeCeiling reads a ceiling; each dimension is optional, and an
// omitted one is no limit at that layer.
func decodeCeiling(o *strictjson.Object) policy.Ceiling {
	var c policy.Ceiling
	if v, ok := o.OptionalUint64("cpu_fuel"); ok {
		c.CPUFuel = policy.Some(v)
	}
	if v, ok := o.OptionalUint64("memory_bytes"); ok {
		c.MemoryBytes = policy.Some(v)
	}
	if v, ok := o.OptionalMillis("wall_time_ms"); ok {
		c.WallTime = policy.Some(v)
	}
	o.Done()
	return c
}
