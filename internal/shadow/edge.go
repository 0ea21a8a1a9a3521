package shadow

import (
	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/coretrace"
	"latent.dev/admission/internal/edgecheck"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// answerUnauthenticated is the edge's answer to an unknown token, which
// the replay gives itself: it is no admission answer.
var answerUnauthenticated = Answer{Answer: trace.AnswerUnauthenticated}

// answerOf is the answer of a core error.
func answerOf(err error) Answer {
	var a Answer
	a.Answer, a.Scope, a.Dimension = coretrace.Answer(err)
	return a
}

// passed is what the edge's checks hand to admission: the principal and
// the resolved route in the pin of the decision's generation.
type passed struct {
	principal core.Principal
	pin       *catalog.Pin
	rev       *policy.ResolvedRevision
	handle    *catalog.Handle
}

// edgeChecks are the checks the edge makes before admission, the edge's
// own (internal/edgecheck), under the candidate policy: the token's
// principal, then step 3 against the path's tenant, then the route's
// resolution. ok is false when the edge refuses, with its answer; an
// answer the edge recorded itself keeps its own scope and dimension.
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
	// A kind the policy does not name stays the zero kind, which step 3
	// refuses.
	kind, _ := policy.ParsePrincipalKind(pr.Kind)
	in.principal = core.Principal{Kind: kind, Subject: pr.Subject, Tenant: pr.Tenant, Service: pr.Service}
	if err := edgecheck.Authorize(r.provider, pr.Admin, &in.principal, d.Target.Tenant); err != nil {
		return edge(answerOf(err)), in, false
	}
	in.pin = r.pinFor(d.Generation, true)
	rev, handle, err := edgecheck.Resolve(in.pin, catalog.Target{Tenant: d.Target.Tenant, Service: d.Target.Service, Route: d.Target.Route}, d.RoutingKey)
	if err != nil {
		return edge(answerOf(err)), in, false
	}
	in.rev, in.handle = rev, handle
	return Answer{}, in, true
}
