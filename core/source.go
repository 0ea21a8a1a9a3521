package core

import "latent.dev/admission/policy"

// RevisionPolicySource is a pinned, immutable view of deployed revisions
// (the catalog's Pin satisfies it). Admission asks it, once per request,
// for the typed policy of the revision a request names.
type RevisionPolicySource interface {
	// RevisionPolicy verifies every field of the tenant, service, route,
	// contract, function, revision, release and generation tuple of rev
	// against the view and returns the revision's typed policy, or false
	// if any field differs or the revision is not in the view. It never
	// re-resolves, ignores rev.Attributes, must not allocate, block or
	// touch a file, and the returned policy must never change afterwards.
	RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool)
}

// ValidatedRevisionSource is a source that vouches that every identity it
// holds obeys the identifier character rules: the catalog's Pin does, as
// the catalog validates each one when a deployment is compiled. For a
// request whose revision identity such a source holds, step 2 checks the
// identity's lengths against the node's bounds without scanning its
// characters again; an identity the source does not hold is scanned, so
// it still gets step 2's answer before step 5's. A permit points to the
// source's copy of the identity instead of copying it, which keeps the
// permit's one allocation small.
type ValidatedRevisionSource interface {
	RevisionPolicySource
	// VerifiedRevision is RevisionPolicy that also returns the source's
	// own copy of the identity it verified rev against: equal to rev's
	// field by field, and, like the policy, never changed afterwards.
	// When it does not hold rev (false), the identity is nil or any one
	// the source holds, best the one sharing the most fields with rev:
	// step 2 checks only the length of a field of rev equal to that
	// identity's and scans the others.
	VerifiedRevision(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, *policy.RevisionIdentity, bool)
}
