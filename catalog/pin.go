package catalog

import (
	"sort"
	"sync/atomic"
	"unsafe"

	"latent.dev/admission/policy"
)

// Pin is an immutable view of a catalog at one generation: the route
// resolver and the revision policy source at once. Nothing reachable from
// a Pin is ever written after it is published (but for a small cache of
// verified revisions, which changes no answer), so a Pin may be shared by
// any number of goroutines without locks, and it keeps serving exactly its
// deployments however the catalog changes later. It holds no file.
//
// A Pin is a trusted, process-local capability: it is not serializable,
// and an embedding program that keeps old pins keeps their deployments in
// memory, so it should not keep unboundedly many.
type Pin struct {
	generation uint64
	index      index
	usage      Usage
	verified   verifiedCache
}

// verifiedCache remembers revisions this pin verified for requests whose
// identity strings are the pin's own (as [Pin.Resolve] hands them out),
// by the address of the revision ID's bytes. A request resolved through
// the pin then verifies by comparing its identity with the cached
// revision's, field by field (equal strings that share their bytes
// compare at once), instead of hashing its way down the trie. A hit
// requires the whole identity to be equal, and a pin holds at most one
// revision per identity, so the cache never changes an answer; a
// request whose strings are its own copies always takes the full path
// and fills nothing, so it cannot make the cache churn.
type verifiedCache [verifiedSlots]atomic.Pointer[revision]

const verifiedSlots = 64

func (c *verifiedCache) slot(id string) *atomic.Pointer[revision] {
	return &c[uintptr(unsafe.Pointer(unsafe.StringData(id)))>>4%verifiedSlots]
}

// lookup returns the deployment of (tenant, service), or nil.
func (p *Pin) lookup(tenant, service string) *deployment {
	return p.index.get(keyHash(tenant, service), tenant, service)
}

// Generation is the catalog generation the pin was taken at.
func (p *Pin) Generation() uint64 { return p.generation }

// Usage is what the pin's deployments hold against the catalog capacity.
func (p *Pin) Usage() Usage { return p.usage }

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
func (p *Pin) Resolve(target Target, routingKey string) (*policy.ResolvedRevision, error) {
	dep := p.lookup(target.Tenant, target.Service)
	if dep == nil {
		return nil, ErrNotResolved
	}
	rt := dep.route(target.Route)
	if rt == nil {
		return nil, ErrNotResolved
	}
	total := rt.totalWeight()
	if total == 0 {
		return nil, ErrNotResolved
	}
	point := RoutingHash(routingKey) % total
	// The first revision whose cumulative weight passes the point; a
	// weight-0 revision repeats its predecessor's sum and is never first.
	j := sort.Search(len(rt.cumulative), func(k int) bool { return rt.cumulative[k] > point })
	rev := &rt.revisions[j]
	return &policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{
		Tenant:     dep.tenant,
		Service:    dep.service,
		Route:      rt.name,
		Contract:   rt.contract,
		Function:   rt.function,
		Revision:   rev.id,
		Release:    rev.releaseID,
		Generation: dep.generation,
	}}, nil
}

// RevisionPolicy returns the typed policy of rev if the pin holds a
// deployment of (rev.Tenant, rev.Service) deployed at rev.Generation whose
// route rev.Route has contract rev.Contract, function rev.Function and a
// revision rev.Revision of release rev.Release; otherwise false. It never
// re-resolves, ignores rev.Attributes, allocates nothing and touches no
// file. The returned policy is shared and must not be modified.
func (p *Pin) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if r := p.verify(rev); r != nil {
		return &r.spec.Policy, true
	}
	return nil, false
}

// VerifiedRevision is [Pin.RevisionPolicy] that also returns the pin's
// own copy of the identity it verified rev against, equal to rev's field
// by field. Both are shared, never change, and must not be modified. It
// makes the pin a core.ValidatedRevisionSource: every identity a pin
// holds obeys the identifier character rules, because a deployment is
// validated when it is compiled and generated identities are hex.
//
// When the pin does not hold rev, the policy is nil and the identity is
// the pin's identity that shares the most leading fields with rev (the
// same deployment, then the same route, then the same revision ID), or
// nil when no deployment matches: admission need not scan a field of rev
// that equals it.
func (p *Pin) VerifiedRevision(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, *policy.RevisionIdentity, bool) {
	r, near := p.verifyNear(rev)
	switch {
	case r != nil:
		return &r.spec.Policy, &r.identity, true
	case near != nil:
		return nil, &near.identity, false
	}
	return nil, nil, false
}

// verify returns the pin's revision whose whole identity tuple is rev's,
// or nil.
func (p *Pin) verify(rev *policy.ResolvedRevision) *revision {
	r, _ := p.verifyNear(rev)
	return r
}

// verifyNear is verify that, on a miss, also returns lookupRevision's
// nearest revision.
func (p *Pin) verifyNear(rev *policy.ResolvedRevision) (r, near *revision) {
	if p == nil || rev == nil {
		return nil, nil
	}
	slot := p.verified.slot(rev.Revision)
	if r := slot.Load(); r != nil && sameIdentity(&r.identity, &rev.RevisionIdentity) {
		return r, nil
	}
	r, near = p.lookupRevision(rev)
	if r != nil && unsafe.StringData(rev.Revision) == unsafe.StringData(r.id) && slot.Load() != r {
		slot.Store(r)
	}
	return r, near
}

// sameIdentity is a == b, comparing each string's address and length
// first: the identities a resolved request carries share the pin's bytes.
func sameIdentity(a, b *policy.RevisionIdentity) bool {
	return a.Generation == b.Generation && sameString(a.Revision, b.Revision) && sameString(a.Release, b.Release) &&
		sameString(a.Tenant, b.Tenant) && sameString(a.Service, b.Service) && sameString(a.Route, b.Route) &&
		sameString(a.Contract, b.Contract) && sameString(a.Function, b.Function)
}

func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// lookupRevision is verify without the cache. On a miss it also returns
// the revision whose identity matched rev furthest: one of the same
// deployment, then of the same route, then the one with rev's revision
// ID (whose release differs); nil when no deployment matches.
func (p *Pin) lookupRevision(rev *policy.ResolvedRevision) (r, near *revision) {
	dep := p.lookup(rev.Tenant, rev.Service)
	if dep == nil {
		return nil, nil
	}
	near = dep.first()
	if dep.generation != rev.Generation {
		return nil, near
	}
	// The route by its short name, then the revision by comparing IDs
	// within it: a route holds a handful of revisions with distinct IDs,
	// and comparing a 68-byte ID costs less than hashing it.
	rt := dep.route(rev.Route)
	if rt == nil {
		return nil, near
	}
	if len(rt.revisions) != 0 {
		near = &rt.revisions[0]
	}
	if rt.contract != rev.Contract || rt.function != rev.Function {
		return nil, near
	}
	for j := range rt.revisions {
		if r := &rt.revisions[j]; r.id == rev.Revision {
			if r.releaseID != rev.Release {
				return nil, r
			}
			return r, nil
		}
	}
	return nil, near
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
