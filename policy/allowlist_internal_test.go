package policy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAllowlistComparesTenantsAndNames forces hash collisions, which a
// real table meets only by chance: a slot whose hash equals the
// request's must still match the tenant's ID and the subject itself, and
// a subject must not match its own prefix or repetition.
func TestAllowlistComparesTenantsAndNames(t *testing.T) {
	collide := func(reqID TenantID, reqSubject string, id TenantID, subject string) principalKinds {
		a := allowlist{key: [2]uint64{7, 11 | 1<<63}, slots: make([]allowSlot, 2), mask: 1}
		h := subjectHash(a.key, reqID, reqSubject)
		a.slots[h&a.mask] = allowSlot{hash: h, id: id, subject: subject, kinds: 1 << UserPrincipal}
		return a.find(reqID, reqSubject)
	}
	for _, tc := range []struct {
		reqID      TenantID
		reqSubject string
		id         TenantID
		subject    string
		match      bool
	}{
		{1, "alice", 1, "alice", true},
		{1, "abcd", 1, "abcdabcd", false},
		{1, "alice", 2, "alice", false},
		{1, "alice", 1, "alicf", false},
		{0, "a-long-subject", 0, "a-long-subjecu", false},
		{0, "a-long-subject", 0, "a-long-subject", true},
	} {
		got := collide(tc.reqID, tc.reqSubject, tc.id, tc.subject) != 0
		assert.Equal(t, tc.match, got, "(%d, %q) against a colliding slot (%d, %q)",
			tc.reqID, tc.reqSubject, tc.id, tc.subject)
	}
}

// TestSubjectHash: the tenant and the key change the hash, and subjects
// of every length are found without allocating.
func TestSubjectHash(t *testing.T) {
	k := [2]uint64{1, 2 | 1<<63}
	assert.NotEqual(t, subjectHash(k, 0, "alice"), subjectHash(k, 1, "alice"))
	assert.NotEqual(t, subjectHash(k, 0, "alice"), subjectHash(k, 0, "alicf"))
	assert.Equal(t, subjectHash(k, 3, "alice"), subjectHash(k, 3, strings.Clone("alice")))
	for _, s := range []string{"", "a", "acme", "a-longer-subject-name", strings.Repeat("x", 70)} {
		assert.NotEqual(t, subjectHash(k, 0, s), subjectHash([2]uint64{1, 3 | 1<<63}, 0, s), "%q under two keys", s)
	}
	a := newAllowlist(8)
	var names []string
	for i, n := range []int{1, 63, 64, 65, 127, 128, 129, 300} {
		subject := strings.Repeat("s", n)
		names = append(names, subject)
		a.add(TenantID(i), subject, 1<<UserPrincipal)
	}
	for i, s := range names {
		assert.Equal(t, principalKinds(1<<UserPrincipal), a.find(TenantID(i), s), "(%d, %d bytes)", i, len(s))
		assert.Zero(t, a.find(TenantID(i+1), s), "(%d, %d bytes) under another tenant", i+1, len(s))
		assert.Zero(t, a.find(TenantID(i), s+"x"))
		allocs := testing.AllocsPerRun(100, func() { a.find(TenantID(i), s) })
		assert.Zero(t, allocs, "allocations finding (%d bytes)", len(s))
	}
}
