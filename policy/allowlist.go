package policy

import (
	"math/bits"
	"math/rand/v2"

	"latent.dev/admission/internal/strhash"
)

// allowlist is every tenant's principal allowlist in one open-addressing
// table keyed by (tenant, subject), so that admission's step 3 finds the
// tenant and checks the principal with one hash of both names and one
// probe sequence, instead of a lookup in a tenant map and another in that
// tenant's allowlist. It is built at compile time and never changes; its
// load factor is at most one half.
type allowlist struct {
	seed  uint64
	slots []allowSlot
	mask  uint64
}

type allowSlot struct {
	hash    uint64
	tenant  string // "" marks an empty slot: a tenant ID is never empty
	subject string
	// tenantWord and subjectWord are strhash.Short of tenant and
	// subject: with the lengths they decide equality for names of at
	// most eight bytes without reading the names.
	tenantWord, subjectWord uint64
	id                      TenantID
	kinds                   principalKinds
}

func newAllowlist(entries int) allowlist {
	size := uint64(2)
	if entries > 0 {
		size = 1 << bits.Len64(uint64(entries)*2-1)
	}
	return allowlist{seed: rand.Uint64(), slots: make([]allowSlot, size), mask: size - 1}
}

// add lists subject under tenant with the kinds in k. Each (tenant,
// subject) is added once: Compile merges a subject's kinds per tenant
// first, and tenant IDs are unique.
func (a *allowlist) add(tenant, subject string, id TenantID, k principalKinds) {
	h := strhash.Pair(a.seed, tenant, subject)
	i := h & a.mask
	for a.slots[i].tenant != "" {
		i = (i + 1) & a.mask
	}
	a.slots[i] = allowSlot{hash: h, tenant: tenant, subject: subject,
		tenantWord: strhash.Short(tenant), subjectWord: strhash.Short(subject), id: id, kinds: k}
}

// find returns the slot of (tenant, subject), or nil.
func (a *allowlist) find(tenant, subject string) *allowSlot {
	if len(tenant) <= 8 && len(subject) <= 8 {
		// Two short names, the common case: hashed and compared as
		// words (a slot's words are Short of names of its own lengths).
		tw, sw := strhash.Short(tenant), strhash.Short(subject)
		h := strhash.PairWords(a.seed, tw, sw, len(tenant), len(subject))
		for i := h & a.mask; ; i = (i + 1) & a.mask {
			s := &a.slots[i]
			if s.tenant == "" {
				return nil
			}
			if s.hash == h && s.tenantWord == tw && s.subjectWord == sw && len(s.tenant) == len(tenant) && len(s.subject) == len(subject) {
				return s
			}
		}
	}
	h := strhash.Pair(a.seed, tenant, subject)
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		s := &a.slots[i]
		if s.tenant == "" {
			return nil
		}
		if s.hash == h && s.tenant == tenant && s.subject == subject {
			return s
		}
	}
}

// AuthorizedPrincipal is step 3's lookup in one: the ID of tenant and
// whether (kind, subject) is on its allowlist. ok is false for an unknown
// tenant, a subject not listed for kind, and an anonymous principal alike.
func (c *Compiled) AuthorizedPrincipal(tenant string, kind PrincipalKind, subject string) (id TenantID, ok bool) {
	if kind != UserPrincipal && kind != ServicePrincipal {
		return 0, false
	}
	s := c.allow.find(tenant, subject)
	if s == nil || s.kinds&(1<<kind) == 0 {
		return 0, false
	}
	return s.id, true
}
