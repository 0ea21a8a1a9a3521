package catalog

import (
	"fmt"
	"slices"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// deployment is the compiled, immutable form of a Deployment at one
// generation. Pins share it: nothing reachable from it is ever written
// after compileDeployment returns.
type deployment struct {
	tenant     string
	service    string
	generation uint64
	routes     []route        // file order: the store keeps it
	routeIndex map[string]int // route name -> index in routes; nil for a few routes, which are compared by name
	usage      CapacityUse
}

type route struct {
	name       string
	contract   string
	function   string
	revisions  []revision
	cumulative []uint64 // cumulative[i] = weights of revisions[0..i]
}

// revision is one revision's small retained record: its identities, its
// release metadata, its weight and its typed policy, never the artifact.
type revision struct {
	id         string
	releaseID  string
	spec       Revision // normalized; &spec.Policy is what admission is handed
	recordSize uint64
	// identity is the revision's whole identity tuple, which admission
	// verifies a request against; a permit points to it rather than
	// copying it.
	identity policy.RevisionIdentity
	// requirements is admission's slot for the node requirements it
	// derives from spec.Policy (core's requirements, with the provider
	// they were derived for). It is the one field written after the
	// revision is published; nothing in this package reads it.
	requirements policy.RecordSlot
}

// compileDeployment validates d and builds its immutable compiled form.
// It copies everything it keeps, so the caller may reuse d.
func compileDeployment(d *Deployment, generation uint64) (*deployment, error) {
	var problems strictjson.Problems
	dep := compileReporting(d, generation, "", &problems)
	if dep == nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidDeployment, problems)
	}
	return dep, nil
}

// compileReporting is compileDeployment for one deployment of many: it
// appends d's problems, each path under prefix, to problems and returns
// nil if there were any.
func compileReporting(d *Deployment, generation uint64, prefix string, problems *strictjson.Problems) *deployment {
	before := len(*problems)
	validateDeployment(d, prefix, func(path, format string, args ...any) {
		*problems = append(*problems, strictjson.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	})
	if len(*problems) > before {
		return nil
	}
	dep := &deployment{
		tenant:     d.Tenant,
		service:    d.Service,
		generation: generation,
		routes:     make([]route, len(d.Routes)),
	}
	if len(d.Routes) > linearRoutes {
		dep.routeIndex = make(map[string]int, len(d.Routes))
	}
	for i := range d.Routes {
		src := &d.Routes[i]
		rt := &dep.routes[i]
		*rt = route{
			name:       src.Name,
			contract:   src.Contract,
			function:   src.Function,
			revisions:  make([]revision, len(src.Revisions)),
			cumulative: make([]uint64, len(src.Revisions)),
		}
		if dep.routeIndex != nil {
			dep.routeIndex[rt.name] = i
		}
		var total uint64
		for j := range src.Revisions {
			n := normalizeRevision(src.Revisions[j])
			releaseID := ReleaseID(n.Release)
			rev := &rt.revisions[j]
			id := revisionID(d.Tenant, d.Service, src, releaseID, &n)
			*rev = revision{
				id:         id,
				releaseID:  releaseID,
				spec:       n,
				recordSize: uint64(len(appendRevisionRecord(nil, &n))),
				identity: policy.RevisionIdentity{Tenant: dep.tenant, Service: dep.service, Route: rt.name,
					Contract: rt.contract, Function: rt.function, Revision: id, Release: releaseID, Generation: generation},
			}
			total += n.Weight // validation ruled out overflow
			rt.cumulative[j] = total
			dep.usage.Revisions++
			dep.usage.PolicyBytes += rev.recordSize
		}
	}
	return dep
}

// spec rebuilds the Deployment that compiled into dep (normalized).
func (dep *deployment) spec() Deployment {
	d := Deployment{Tenant: dep.tenant, Service: dep.service, Routes: make([]Route, len(dep.routes))}
	for i := range dep.routes {
		rt := &dep.routes[i]
		out := Route{Name: rt.name, Contract: rt.contract, Function: rt.function, Revisions: make([]Revision, len(rt.revisions))}
		for j := range rt.revisions {
			out.Revisions[j] = cloneRevision(rt.revisions[j].spec)
		}
		d.Routes[i] = out
	}
	return d
}

func cloneRevision(r Revision) Revision {
	p := &r.Policy
	p.Features = slices.Clone(p.Features)
	p.Placement.Architectures = slices.Clone(p.Placement.Architectures)
	p.Placement.Regions = slices.Clone(p.Placement.Regions)
	p.Placement.Zones = slices.Clone(p.Placement.Zones)
	return r
}
