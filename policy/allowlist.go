package policy

import (
	"math/bits"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
)

// allowlist is every tenant's principal allowlist in one open-addressing
// table keyed by (tenant, subject), so that admission's step 3 finds the
// tenant and checks the principal with one hash of both names and one
// probe sequence, instead of a lookup in a tenant map and another in that
// tenant's allowlist. It is built at compile time and never changes; its
// load factor is at most one half.
type allowlist struct {
	key   [2]uint64 // chosen per table; see pairHash
	slots []allowSlot
	mask  uint64
}

type allowSlot struct {
	hash    uint64
	tenant  string // "" marks an empty slot: a tenant ID is never empty
	subject string
	id      TenantID
	kinds   principalKinds
}

func newAllowlist(entries int) allowlist {
	size := uint64(2)
	if entries > 0 {
		size = 1 << bits.Len64(uint64(entries)*2-1)
	}
	return allowlist{key: [2]uint64{rand.Uint64(), rand.Uint64()}, slots: make([]allowSlot, size), mask: size - 1}
}

// pairHash is the hash of (tenant, subject) under key: each name hashed
// with xxhash, each hash XORed with one half of the key, and the two
// folded by one 128-bit multiplication. Each name is hashed whole, so
// ("ab", "c") and ("a", "bc") do not meet by construction, and the
// halves of the key differ, so neither do (a, b) and (b, a). The table
// is built from configuration, but a request chooses what it probes for;
// a key it does not know keeps it from aiming at one probe run.
func pairHash(key [2]uint64, tenant, subject string) uint64 {
	hi, lo := bits.Mul64(xxhash.Sum64String(tenant)^key[0], xxhash.Sum64String(subject)^key[1])
	return hi ^ lo
}

// add lists subject under tenant with the kinds in k. Each (tenant,
// subject) is added once: Compile merges a subject's kinds per tenant
// first, and tenant IDs are unique.
func (a *allowlist) add(tenant, subject string, id TenantID, k principalKinds) {
	h := pairHash(a.key, tenant, subject)
	i := h & a.mask
	for a.slots[i].tenant != "" {
		i = (i + 1) & a.mask
	}
	a.slots[i] = allowSlot{hash: h, tenant: tenant, subject: subject, id: id, kinds: k}
}

// find returns the slot of (tenant, subject), or nil.
func (a *allowlist) find(tenant, subject string) *allowSlot {
	h := pairHash(a.key, tenant, subject)
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
