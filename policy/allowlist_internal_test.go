package policy

import (
	"testing"

	"latent.dev/admission/internal/strhash"
)

// TestAllowlistComparesLengthsAndNames forces hash collisions, which a
// real table meets only by chance: a slot whose hash equals the
// request's must still match the names themselves. Short names are
// compared as words, and "abcd" and "abcdabcd" read as the same word, so
// only their lengths tell them apart; long names are compared as
// strings.
func TestAllowlistComparesLengthsAndNames(t *testing.T) {
	collide := func(reqTenant, reqSubject, tenant, subject string) *allowSlot {
		a := allowlist{seed: 7, slots: make([]allowSlot, 2), mask: 1}
		h := strhash.Pair(a.seed, reqTenant, reqSubject)
		a.slots[h&a.mask] = allowSlot{hash: h, tenant: tenant, subject: subject,
			tenantWord: strhash.Short(tenant), subjectWord: strhash.Short(subject), kinds: 1 << UserPrincipal}
		return a.find(reqTenant, reqSubject)
	}
	if strhash.Short("abcd") != strhash.Short("abcdabcd") {
		t.Fatal("the aliasing pair no longer aliases; pick another")
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
		if got := collide(tc.reqTenant, tc.reqSubject, tc.tenant, tc.subject) != nil; got != tc.match {
			t.Errorf("(%q, %q) against a colliding slot (%q, %q): match %v, want %v",
				tc.reqTenant, tc.reqSubject, tc.tenant, tc.subject, got, tc.match)
		}
	}
}
