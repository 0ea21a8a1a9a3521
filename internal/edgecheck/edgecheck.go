// Package edgecheck holds the checks a node's edge makes before
// admission: latentd makes them on every invocation, and shadow replays
// them under a candidate policy, so both call this one implementation.
//
// Who the caller is comes first (the bearer token; the edge answers an
// unknown one itself), then Authorize, before any route is resolved, so
// that another tenant's paths get the same answer whether they exist or
// not (docs/latentd.md); then Resolve. Each refusal is admission's own
// error value (core.Error), the one Admit gives for the same fault.
package edgecheck

import (
	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Authorize is admission's step 3 asked before the route is resolved:
// may who call the revisions of the path's tenant under the provider's
// policy? An administrator's token calls nothing: it names no principal,
// so it is asked as one with no kind, which step 3 refuses. The answer
// is core's own (core.LocalQuotaProvider.AuthorizePrincipal).
func Authorize(p *core.LocalQuotaProvider, admin bool, who *core.Principal, tenant string) error {
	if admin {
		return p.AuthorizePrincipal(&core.Principal{}, tenant)
	}
	return p.AuthorizePrincipal(who, tenant)
}

// Resolve is the route's resolution in the pinned view: the revision the
// target and routing key pick, and its handle. A pin that is missing and
// a route that resolves to nothing are refused with
// core.ErrRevisionNotAvailable, the answer admission gives a forged
// revision (docs/decision-table.md, step 5), so the three look alike.
func Resolve(pin *catalog.Pin, t catalog.Target, routingKey string) (*policy.ResolvedRevision, *catalog.Handle, error) {
	if pin == nil {
		return nil, nil, core.ErrRevisionNotAvailable
	}
	rev, handle, err := pin.Resolve(t, routingKey)
	if err != nil {
		return nil, nil, core.ErrRevisionNotAvailable
	}
	return rev, handle, nil
}
