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
	// against the controller's pinned view.
	Revision policy.ResolvedRevision
	// Handle is what the route resolver handed out beside Revision, if
	// it hands any out (catalog.Pin.Resolve does). When the controller's
	// source recognises it as one of its own records and Revision's
	// identity is that record's, admission takes the record as verified;
	// otherwise (no handle, another source's, an edited identity) it
	// verifies Revision field by field. Either way the answer is the
	// same; only the cost differs.
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
