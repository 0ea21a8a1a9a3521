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
