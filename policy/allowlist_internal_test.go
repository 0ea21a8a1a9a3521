package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAllowlistComparesLengthsAndNames forces hash collisions, which a
// real table meets only by chance: a slot whose hash equals the
// request's must still match the names themselves, short or long, and a
// name must not match its own prefix or repetition.
func TestAllowlistComparesLengthsAndNames(t *testing.T) {
	collide := func(reqTenant, reqSubject, tenant, subject string) *allowSlot {
		a := allowlist{key: [2]uint64{7, 11}, slots: make([]allowSlot, 2), mask: 1}
		h := pairHash(a.key, reqTenant, reqSubject)
		a.slots[h&a.mask] = allowSlot{hash: h, tenant: tenant, subject: subject, kinds: 1 << UserPrincipal}
		return a.find(reqTenant, reqSubject)
	}
	for _, tc := range []struct {
		reqTenant, reqSubject, tenant, subject string
		match                                  bool
	}{
		{"acme", "alice", "acme", "alice", true},
		{"abcd", "x", "abcdabcd", "x", false},
		{"x", "abcd", "x", "abcdabcd", false},
		{"acme", "alice", "acmf", "alice", false},
		{"acme", "alice", "acme", "alicf", false},
		{"a-tenant-name", "alice", "a-tenant-name", "alice", true},
		{"a-tenant-name", "alice", "a-tenant-namf", "alice", false},
		{"acme", "a-long-subject", "acme", "a-long-subjecu", false},
		{"acme", "a-long-subject", "acme", "a-long-subject", true},
	} {
		got := collide(tc.reqTenant, tc.reqSubject, tc.tenant, tc.subject) != nil
		assert.Equal(t, tc.match, got, "(%q, %q) against a colliding slot (%q, %q)",
			tc.reqTenant, tc.reqSubject, tc.tenant, tc.subject)
	}
}

// TestPairHash: the halves of a pair do not run together or swap, the
// key changes the hash, and names of every length are found without
// allocating.
func TestPairHash(t *testing.T) {
	k := [2]uint64{1, 2}
	assert.NotEqual(t, pairHash(k, "ab", "c"), pairHash(k, "a", "bc"))
	assert.NotEqual(t, pairHash(k, "", "x"), pairHash(k, "x", ""))
	assert.NotEqual(t, pairHash(k, "acme", "alice"), pairHash(k, "alice", "acme"))
	assert.Equal(t, pairHash(k, "acme", "alice"), pairHash(k, strings.Clone("acme"), "alice"))
	for _, s := range []string{"", "a", "acme", "a-longer-tenant-name", strings.Repeat("x", 70)} {
		assert.NotEqual(t, pairHash(k, s, "alice"), pairHash([2]uint64{1, 3}, s, "alice"), "%q under two keys", s)
	}
	a := newAllowlist(8)
	var names [][2]string
	for _, n := range []int{1, 63, 64, 65, 127, 128, 129, 300} {
		tenant := strings.Repeat("t", n/2+1)
		subject := strings.Repeat("s", n-n/2)
		names = append(names, [2]string{tenant, subject})
		a.add(tenant, subject, TenantID(n), 1<<UserPrincipal)
	}
	for _, p := range names {
		s := a.find(p[0], p[1])
		if assert.NotNil(t, s, "(%d, %d bytes)", len(p[0]), len(p[1])) {
			assert.Equal(t, p[0], s.tenant)
			assert.Equal(t, p[1], s.subject)
		}
		assert.Nil(t, a.find(p[0]+"x", p[1]))
		allocs := testing.AllocsPerRun(100, func() { a.find(p[0], p[1]) })
		assert.Zero(t, allocs, "allocations finding (%d, %d bytes)", len(p[0]), len(p[1]))
	}
}
