package core

import "latent.dev/admission/policy"

// AdmissionRequest is one activation asking to run. The adapter that
// builds it has authenticated the principal and measured the payload;
// admission trusts nothing else in it.
type AdmissionRequest struct {
	// ActivationID is the caller-chosen ID; live reservations are unique
	// per (tenant, ActivationID).
	ActivationID string
	Principal    Principal
	// Revision is the route resolver's answer, verified field by field
	// against the controller's pinned view. Its identity may be left
	// zero when Handle carries the revision (below).
	Revision policy.ResolvedRevision
	// Handle is what the route resolver handed out beside Revision, if
	// it hands any out (catalog.Pin.Resolve does). When the controller's
	// source recognises it as one of its own records:
	//   - a request whose Revision identity is zero (no field set) is the
	//     record's: the handle carries the revision, which nobody can
	//     edit, so nothing is compared (latentd's requests are so);
	//   - a request whose identity is the record's, field by field, is
	//     taken as verified;
	//   - any other identity is verified field by field, as without a
	//     handle.
	// Either way the answer is the one the request naming the record's
	// identity gets; only the cost differs. A handle the source does
	// not recognise (nil, another source's, any handle through a plain
	// source) carries nothing: a request naming no identity with it
	// names none, step 2's answer.
	Handle          RevisionHandle
	RequestedBudget policy.Budget
	// Deadline is the caller's absolute deadline in unix milliseconds, if
	// it has one; it can only shorten the grant.
	Deadline     policy.Optional[int64]
	PayloadBytes uint64
	Priority     uint32
	// Attributes are untrusted request metadata: counted against the
	// metadata bounds and otherwise ignored.
	Attributes map[string]string
}

// Principal is the authenticated caller.
type Principal struct {
	Kind    policy.PrincipalKind
	Subject string
	Tenant  string
	// Service is the calling service's identity; required for service
	// principals.
	Service string
	// Claims are counted against the metadata bounds and never grant
	// anything.
	Claims map[string]string
}
