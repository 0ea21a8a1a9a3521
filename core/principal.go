package core

import "latent.dev/admission/core/atomicledger"

// AuthorizePrincipal is step 3 asked on its own, before a revision is
// resolved: may p call tenant's revisions under the provider's policy?
// An edge that must answer another tenant's paths alike, whether they
// exist or not, asks it before it consults its catalog. It runs the
// controller's own step-3 check (steps.go, checkPrincipal) after the
// allowlist lookup step 2 makes, and a refusal is the very error value
// Admit returns at step 3, so errors.Is holds between them.
func (p *LocalQuotaProvider) AuthorizePrincipal(who *Principal, tenant string) error {
	req := AdmissionRequest{Principal: *who}
	req.Revision.Tenant = tenant
	var d decision
	_, d.principalListed = p.policy.AuthorizedPrincipal(who.Tenant, who.Kind, who.Subject)
	c := AdmissionController{provider: p}
	if r := c.checkPrincipal(&req, &d); r != nil {
		return r.err()
	}
	return nil
}

// ErrQueueClassFull is the retryable capacity rejection of the queue
// class scope's queued reservations. An adapter whose own queue for the
// class is full answers it, as admission does when the ledger's queued
// reservations are.
var ErrQueueClassFull = capacityErrors[atomicledger.QueueClassScope][atomicledger.QueuedReservations][0].err()
