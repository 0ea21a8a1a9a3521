package catalog

import (
	"sort"

	"latent.dev/admission/policy"
)

// Pin is an immutable view of a catalog at one generation: the route
// resolver and the revision policy source at once. Nothing reachable from
// a Pin is ever written after it is published (but for each revision's
// requirements slot, which admission fills and which changes no answer),
// so a Pin may be shared by any number of goroutines without locks, and
// it keeps serving exactly its deployments however the catalog changes
// later. It holds no file.
//
// A Pin is a trusted, process-local capability: it is not serializable,
// and an embedding program that keeps old pins keeps their deployments in
// memory, so it should not keep unboundedly many.
type Pin struct {
	generation uint64
	index      index
	usage      CapacityUse
}

// Handle refers to the pin's own record of the revision [Pin.Resolve]
// picked: its identity, its typed policy and its requirements slot. It
// satisfies core.RevisionHandle: an adapter puts it in the request, and a
// controller bound to the same pin then takes the record as the request's
// revision, either because the request names no identity (the handle
// carries it) or because the identity it names is still the record's.
// Only Resolve makes one, and only the pin that made it recognises it
// (see [Pin.OwnRecord]).
type Handle struct {
	pin *Pin
	dep *deployment // rev's deployment, as p's index holds it
	rev *revision
}

// RevisionIdentity is the identity of the revision h refers to; the zero
// identity for a nil or zero h, which refers to nothing and which no pin
// recognises.
func (h *Handle) RevisionIdentity() policy.RevisionIdentity {
	if h == nil || h.rev == nil {
		return policy.RevisionIdentity{}
	}
	return h.rev.identity
}

// resolution is what one Resolve allocates: the identity it returns and
// the handle beside it, in one object.
type resolution struct {
	revision policy.ResolvedRevision
	handle   Handle
}

// lookup returns the deployment of (tenant, service), or nil.
func (p *Pin) lookup(tenant, service string) *deployment {
	return p.index.get(keyHash(tenant, service), tenant, service)
}

// Generation is the catalog generation the pin was taken at.
func (p *Pin) Generation() uint64 { return p.generation }

// CapacityUse is what the pin's deployments hold against the catalog capacity.
func (p *Pin) CapacityUse() CapacityUse { return p.usage }

// Len is the number of deployments in the pin.
func (p *Pin) Len() int { return p.index.count }

// Deployment returns a copy of the deployment of (tenant, service) as the
// catalog normalized it, with the generation it was deployed at.
func (p *Pin) Deployment(tenant, service string) (Deployment, uint64, bool) {
	dep := p.lookup(tenant, service)
	if dep == nil {
		return Deployment{}, 0, false
	}
	return dep.spec(), dep.generation, true
}

// Deployments returns the (tenant, service) pairs of the pin, sorted.
func (p *Pin) Deployments() []DeploymentKey {
	out := make([]DeploymentKey, 0, p.index.count)
	p.index.each(func(d *deployment) { out = append(out, DeploymentKey{d.tenant, d.service}) })
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Service < out[j].Service
	})
	return out
}

// Resolve picks the revision of target's route for routingKey: the stable
// hash of the key (see [RoutingHash]) modulo the sum of the route's
// weights selects a revision over the cumulative weights, so a revision of
// weight w is picked for w out of every sum keys, and one of weight 0
// never. The same key resolves to the same revision for as long as the
// deployment is unchanged, in every process. It returns [ErrNotResolved]
// when there is no such deployment or route, or the weights sum to zero.
//
// Beside the identity it returns a [Handle] to the pin's record of the
// revision, for the request's Handle field: admission through this pin
// then compares nothing when the request names no identity (the handle
// carries it), and skips verifying the identity field by field when it
// names the record's. Both are one allocation.
func (p *Pin) Resolve(target Target, routingKey string) (*policy.ResolvedRevision, *Handle, error) {
	dep := p.lookup(target.Tenant, target.Service)
	if dep == nil {
		return nil, nil, ErrNotResolved
	}
	rt := dep.route(target.Route)
	if rt == nil {
		return nil, nil, ErrNotResolved
	}
	total := rt.totalWeight()
	if total == 0 {
		return nil, nil, ErrNotResolved
	}
	point := RoutingHash(routingKey) % total
	// The first revision whose cumulative weight passes the point; a
	// weight-0 revision repeats its predecessor's sum and is never first.
	j := sort.Search(len(rt.cumulative), func(k int) bool { return rt.cumulative[k] > point })
	rev := &rt.revisions[j]
	r := &resolution{revision: policy.ResolvedRevision{RevisionIdentity: rev.identity}, handle: Handle{pin: p, dep: dep, rev: rev}}
	return &r.revision, &r.handle, nil
}

// linearRoutes is the most routes a deployment finds by comparing names;
// past it a map is cheaper than the comparisons.
const linearRoutes = 8

// route returns the route named name, or nil.
func (d *deployment) route(name string) *route {
	if d.routeIndex == nil {
		for i := range d.routes {
			if d.routes[i].name == name {
				return &d.routes[i]
			}
		}
		return nil
	}
	if i, ok := d.routeIndex[name]; ok {
		return &d.routes[i]
	}
	return nil
}

// totalWeight is the sum of r's revisions' weights.
func (r *route) totalWeight() uint64 {
	if len(r.cumulative) == 0 {
		return 0
	}
	return r.cumulative[len(r.cumulative)-1]
}

// RevisionPolicy returns the typed policy of rev if the pin holds a
// deployment of (rev.Tenant, rev.Service) deployed at rev.Generation whose
// route rev.Route has contract rev.Contract, function rev.Function and a
// revision rev.Revision of release rev.Release; otherwise false. It never
// re-resolves, ignores rev.Attributes, allocates nothing and touches no
// file. The returned policy is shared and must not be modified.
func (p *Pin) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if r := p.verify(nil, rev); r != nil {
		return &r.spec.Policy, true
	}
	return nil, false
}

// RevisionRecord is [Pin.RevisionPolicy] that returns the pin's whole
// record of rev: its identity (equal to rev's field by field), its policy
// and its requirements slot, which admission fills. All are shared and
// never change (but for the slot); none may be modified. With
// [Pin.OwnRecord] it makes the pin a core.RecordSource. h is the
// request's handle: when it is a [*Handle] of this pin whose deployment is
// rev's (tenant, service), the pin starts from that deployment instead of
// looking the pair up in its index; any other h, nil included, gets the
// same answer by the lookup.
func (p *Pin) RevisionRecord(h any, rev *policy.ResolvedRevision) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	own, _ := h.(*Handle)
	if r := p.verify(own, rev); r != nil {
		return &r.identity, &r.spec.Policy, &r.requirements, true
	}
	return nil, nil, nil, false
}

// OwnRecord returns the record h refers to when h is a [*Handle] this
// pin's Resolve made, found by comparing h's pin with p: no lookup and no
// hash. Any other h, a handle of another pin of the same catalog
// included, answers false, and admission then verifies the request's
// identity with [Pin.RevisionRecord].
func (p *Pin) OwnRecord(h any) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	if own, ok := h.(*Handle); ok && own != nil && own.pin == p && p != nil {
		r := own.rev
		return &r.identity, &r.spec.Policy, &r.requirements, true
	}
	return nil, nil, nil, false
}

// verify returns the pin's revision whose whole identity tuple is rev's,
// or nil. When own is a handle of p, its deployment is the one p's index
// holds for its (tenant, service), so a rev of the same pair needs no
// lookup: two hashes and the trie's walk, about a fifth of a
// BenchmarkReject/unknown-revision rejection (a request whose handle is
// another revision's of the same deployment).
func (p *Pin) verify(own *Handle, rev *policy.ResolvedRevision) *revision {
	if p == nil || rev == nil {
		return nil
	}
	var dep *deployment
	if own != nil && own.pin == p && own.dep.tenant == rev.Tenant && own.dep.service == rev.Service {
		dep = own.dep
	} else {
		dep = p.lookup(rev.Tenant, rev.Service)
	}
	if dep == nil || dep.generation != rev.Generation {
		return nil
	}
	// The route by its short name, then the revision by comparing IDs
	// within it: a route holds a handful of revisions with distinct IDs,
	// and comparing a 68-byte ID costs less than hashing it.
	rt := dep.route(rev.Route)
	if rt == nil || rt.contract != rev.Contract || rt.function != rev.Function {
		return nil
	}
	for j := range rt.revisions {
		if r := &rt.revisions[j]; r.id == rev.Revision {
			if r.releaseID != rev.Release {
				return nil
			}
			return r
		}
	}
	return nil
}

// RoutingHash is the stable 64-bit hash that places a routing key on a
// route's weights: FNV-1a over the key's bytes, then the 64-bit finalizer
// of MurmurHash3 so that every output bit depends on every input bit
// (FNV-1a alone leaves similar keys close together). It is part of the
// catalog's contract: changing it moves keys between revisions.
func RoutingHash(key string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
