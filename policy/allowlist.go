package policy

import (
	"math/bits"
	"math/rand/v2"

	"github.com/cespare/xxhash/v2"
)

// allowlist is every tenant's principal allowlist. A tenant lists few
// principals as a rule: a list of at most smallAllowlist subjects is
// searched in order (a string comparison rejects a subject of another
// length without reading it), which costs less than hashing the subject.
// The subjects of tenants with longer lists are in one open-addressing
// table keyed by (tenant ID, subject): one hash of the subject, folded
// with the tenant's ID, and one probe sequence. Admission usually knows
// the tenant's ID already (its revision record keeps it, derived once);
// a lookup by tenant name first finds the ID in the tenants' map. It is
// built at compile time and never changes; the table's load factor is
// at most one half.
type allowlist struct {
	small [][]allowSlot // by tenant ID: its subjects, when it has at most smallAllowlist; else nil
	key   [2]uint64     // chosen per table; see subjectHash
	slots []allowSlot
	mask  uint64
}

// smallAllowlist is the longest list searched in order. Eight
// comparisons, most of them of lengths alone, cost about what hashing
// one short subject does.
const smallAllowlist = 8

type allowSlot struct {
	hash    uint64
	subject string
	id      TenantID
	kinds   principalKinds // 0 marks an empty slot: a listed subject has a kind
}

// newAllowlist builds the allowlist of principals, which holds each
// tenant's subjects and their kinds by tenant ID.
func newAllowlist(principals []map[string]principalKinds) allowlist {
	a := allowlist{small: make([][]allowSlot, len(principals))}
	entries := 0
	for id, subjects := range principals {
		if len(subjects) > smallAllowlist {
			entries += len(subjects)
			continue
		}
		list := make([]allowSlot, 0, len(subjects))
		for subject, kinds := range subjects {
			list = append(list, allowSlot{subject: subject, id: TenantID(id), kinds: kinds})
		}
		a.small[id] = list
	}
	size := uint64(2)
	if entries > 0 {
		size = 1 << bits.Len64(uint64(entries)*2-1)
	}
	a.key = [2]uint64{rand.Uint64(), rand.Uint64() | 1<<63}
	a.slots, a.mask = make([]allowSlot, size), size-1
	for id, subjects := range principals {
		if len(subjects) > smallAllowlist {
			for subject, kinds := range subjects {
				a.add(TenantID(id), subject, kinds)
			}
		}
	}
	return a
}

// subjectHash is the hash of (id, subject) under key: the subject hashed
// with xxhash and XORed with one half of the key, folded by one 128-bit
// multiplication with the tenant's ID XORed with the other half (whose
// top bit is set, so that factor is never zero). The table is built from
// configuration, but a request chooses what it probes for; a key it does
// not know keeps it from aiming at one probe run.
func subjectHash(key [2]uint64, id TenantID, subject string) uint64 {
	hi, lo := bits.Mul64(xxhash.Sum64String(subject)^key[0], uint64(id)^key[1])
	return hi ^ lo
}

// add lists subject under tenant id with the kinds in k (not empty). Each
// (id, subject) is added once: Compile merges a subject's kinds per
// tenant first.
func (a *allowlist) add(id TenantID, subject string, k principalKinds) {
	h := subjectHash(a.key, id, subject)
	i := h & a.mask
	for a.slots[i].kinds != 0 {
		i = (i + 1) & a.mask
	}
	a.slots[i] = allowSlot{hash: h, subject: subject, id: id, kinds: k}
}

// find returns the kinds (id, subject) is listed with, or 0. An id
// that names no tenant finds nothing.
func (a *allowlist) find(id TenantID, subject string) principalKinds {
	if uint(id) < uint(len(a.small)) {
		if list := a.small[id]; list != nil {
			for i := range list {
				if list[i].subject == subject {
					return list[i].kinds
				}
			}
			return 0
		}
	}
	return a.findHashed(id, subject)
}

// findHashed is find in the table of the tenants with long lists.
func (a *allowlist) findHashed(id TenantID, subject string) principalKinds {
	h := subjectHash(a.key, id, subject)
	for i := h & a.mask; ; i = (i + 1) & a.mask {
		s := &a.slots[i]
		if s.kinds == 0 {
			return 0
		}
		if s.hash == h && s.id == id && s.subject == subject {
			return s.kinds
		}
	}
}

// AuthorizedPrincipal is step 3's lookup by name: the ID of tenant and
// whether (kind, subject) is on its allowlist. ok is false for an unknown
// tenant, a subject not listed for kind, and an anonymous principal alike.
func (c *Compiled) AuthorizedPrincipal(tenant string, kind PrincipalKind, subject string) (id TenantID, ok bool) {
	id, known := c.tenantByName[tenant]
	if !known || !c.Authorized(id, kind, subject) {
		return 0, false
	}
	return id, true
}

// Authorized reports whether (kind, subject) is on tenant id's allowlist.
// Anonymous principals are never authorized. An id that names no tenant
// finds nothing.
func (c *Compiled) Authorized(id TenantID, kind PrincipalKind, subject string) bool {
	if kind != UserPrincipal && kind != ServicePrincipal {
		return false
	}
	return c.allow.find(id, subject)&(1<<kind) != 0
}
