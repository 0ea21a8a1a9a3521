package shadow

import (
	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// Edge answers the replay gives itself.
var (
	answerUnauthenticated = Answer{Answer: trace.AnswerUnauthenticated}
	answerNotAuthorized   = Answer{Answer: string(core.ReasonPrincipalNotAuthorized), Scope: string(core.ScopePrincipal), Dimension: string(core.DimIdentity)}
	answerNotAvailable    = Answer{Answer: string(core.ReasonRevisionNotAvailable), Scope: string(core.ScopeRevision), Dimension: string(core.DimRevision)}
)

// passed is what the edge's checks hand to admission: the principal's
// kind and the resolved route in the pin of the decision's generation.
type passed struct {
	kind   policy.PrincipalKind
	pin    *catalog.Pin
	rev    *policy.ResolvedRevision
	handle *catalog.Handle
}

// edgeChecks are the checks the edge makes before admission, under the
// candidate policy: the token's principal, the path's tenant, the
// policy's principal check and the route's resolution. ok is false when
// the edge refuses, with its answer; an answer the edge recorded itself
// keeps its own scope and dimension.
func (r *replay) edgeChecks(l *trace.Line, recorded Answer) (refusal Answer, in passed, ok bool) {
	d := l.Decision
	edge := func(a Answer) Answer {
		if d.Stage == trace.StageEdge && recorded.Answer == a.Answer {
			return recorded // the edge's own scope and dimension
		}
		return a
	}
	switch recorded.Answer {
	case string(core.ReasonMetadataTooLarge), string(core.ReasonBudgetDimensionUnsupported):
		// Judged on what a trace never holds (claims, attributes, the
		// later-phase budget dimensions): the recorded answer stands.
		return recorded, in, false
	}
	pr := d.Principal
	if pr == nil {
		return edge(answerUnauthenticated), in, false
	}
	if pr.Admin || pr.Tenant != d.Target.Tenant {
		return edge(answerNotAuthorized), in, false
	}
	kind, ok := policy.ParsePrincipalKind(pr.Kind)
	if !ok {
		return edge(answerNotAuthorized), in, false
	}
	if _, ok := r.compiled.AuthorizedPrincipal(pr.Tenant, kind, pr.Subject); !ok || (kind == policy.ServicePrincipal && pr.Service == "") {
		return edge(answerNotAuthorized), in, false
	}
	pin := r.pinFor(d.Generation, true)
	if pin == nil {
		return edge(answerNotAvailable), in, false
	}
	rev, handle, err := pin.Resolve(catalog.Target{Tenant: d.Target.Tenant, Service: d.Target.Service, Route: d.Target.Route}, d.RoutingKey)
	if err != nil {
		return edge(answerNotAvailable), in, false
	}
	return Answer{}, passed{kind: kind, pin: pin, rev: rev, handle: handle}, true
}
