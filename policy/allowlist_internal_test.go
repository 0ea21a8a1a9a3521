package policy

import (
	"fmt"
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
	a := allowlist{key: k, slots: make([]allowSlot, 16), mask: 15}
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

// TestShortAndLongAllowlists: a tenant listing at most smallAllowlist
// subjects is searched in order and one listing more through the table;
// each finds exactly its own subjects with their kinds, never another
// tenant's, and an ID past the tenants finds nothing.
func TestShortAndLongAllowlists(t *testing.T) {
	sizes := []int{0, 1, smallAllowlist, smallAllowlist + 1, 40}
	principals := make([]map[string]principalKinds, len(sizes))
	for id, n := range sizes {
		principals[id] = map[string]principalKinds{}
		for j := 0; j < n; j++ {
			principals[id][fmt.Sprintf("subject-%d", j)] = principalKinds(1 + (id+j)%3)
		}
	}
	a := newAllowlist(principals)
	for id, n := range sizes {
		assert.Equal(t, n <= smallAllowlist, a.small[id] != nil, "tenant %d of %d subjects searched in order", id, n)
		for j := 0; j < sizes[len(sizes)-1]+1; j++ {
			subject := fmt.Sprintf("subject-%d", j)
			assert.Equal(t, principals[id][subject], a.find(TenantID(id), subject), "tenant %d, %s", id, subject)
			assert.Zero(t, a.find(TenantID(id), subject+"x"))
		}
		if n > 0 {
			allocs := testing.AllocsPerRun(100, func() { a.find(TenantID(id), "subject-0") })
			assert.Zero(t, allocs, "allocations finding in a list of %d", n)
		}
	}
	assert.Zero(t, a.find(TenantID(len(sizes)), "subject-0"))
	assert.Zero(t, a.find(-1, "subject-0"))
	hashed := 0
	for _, s := range a.slots {
		if s.kinds != 0 {
			hashed++
		}
	}
	assert.Equal(t, smallAllowlist+1+40, hashed, "the table holds the long lists' subjects, and only theirs")

	// Only short lists: the table is empty, and an ID past the tenants
	// still finds nothing in it.
	short := newAllowlist([]map[string]principalKinds{{"a": 1}, {"b": 2, "c": 1}})
	assert.Equal(t, principalKinds(2), short.find(1, "b"))
	assert.Zero(t, short.find(2, "b"))
	assert.Zero(t, short.find(-1, "a"))
}
