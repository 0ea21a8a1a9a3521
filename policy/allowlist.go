package policy

import (
	"encoding/binary"
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
	key   uint64 // chosen per process; see pairHash
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
	return allowlist{key: rand.Uint64(), slots: make([]allowSlot, size), mask: size - 1}
}

// pairHash is the hash of (tenant, subject) under key: xxhash of the
// key, the tenant's length, the tenant and the subject, one after the
// other. The key goes in first rather than being folded into the result,
// so names that collide under one key need not collide under another
// (the table is built from configuration, but a request chooses what it
// probes for); the length makes ("ab", "c") and ("a", "bc") differ.
// Names that fit are written into a stack buffer and hashed in one call,
// longer ones are streamed through a Digest: the bytes, and so the hash,
// are the same.
func pairHash(key uint64, tenant, subject string) uint64 {
	// Room for the key, the length and two names of 64 bytes, the
	// example policy's limit.
	const prefix = 8 + binary.MaxVarintLen64
	var buf [prefix + 128]byte
	binary.LittleEndian.PutUint64(buf[:], key)
	n := 8 + binary.PutUvarint(buf[8:], uint64(len(tenant)))
	if len(tenant)+len(subject) <= len(buf)-prefix {
		n += copy(buf[n:], tenant)
		n += copy(buf[n:], subject)
		return xxhash.Sum64(buf[:n])
	}
	var d xxhash.Digest
	d.Reset()
	d.Write(buf[:n])
	d.WriteString(tenant)
	d.WriteString(subject)
	return d.Sum64()
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
