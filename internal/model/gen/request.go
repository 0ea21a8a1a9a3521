package gen

import (
	"math"
	"strings"
	"time"

	"pgregory.net/rapid"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Request draws a request at now for a node with policy p: mostly one an
// allowlisted principal of the revision's tenant would send for a
// revision of the current view (nil when there is none), otherwise for
// any of revisions; then, often, it is broken in one way.
func Request(t *rapid.T, p *policy.NodeAdmissionPolicy, revisions []policy.ResolvedRevision, current *Source, now time.Time) *core.AdmissionRequest {
	rev := Pick(t, revisions, "req.revision")
	var handle core.RevisionHandle
	if current != nil && Chance(t, 7, 8, "req.revision.current") {
		i := Int(t, 0, len(current.Entries)-1, "req.revision.entry")
		rev = current.Entries[i].Revision
		// Most requests carry the handle the resolver gave them (which
		// breakRequest may then contradict by editing the identity);
		// some carry another entry's.
		switch {
		case Chance(t, 3, 4, "req.handle"):
			handle = current.Handle(i)
		case Chance(t, 1, 2, "req.handle.other"):
			handle = current.Handle(Int(t, 0, len(current.Entries)-1, "req.handle.entry"))
		}
	}
	principal := core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: rev.Tenant}
	for _, tp := range p.Tenants {
		if tp.ID == rev.Tenant && len(tp.Principals) > 0 {
			allowed := Pick(t, tp.Principals, "req.principal")
			kind, _ := policy.ParsePrincipalKind(allowed.Kind)
			principal.Kind, principal.Subject = kind, allowed.Subject
		}
	}
	if principal.Kind == policy.ServicePrincipal {
		principal.Service = "svc-api"
	}
	req := &core.AdmissionRequest{
		ActivationID: Pick(t, activationIDs, "req.id"),
		Principal:    principal,
		Revision:     rev,
		Handle:       handle,
		RequestedBudget: policy.Budget{
			CPUFuel:     uint64(Int(t, 1, 9, "req.fuel")),
			MemoryBytes: uint64(Int(t, 1, 9, "req.memory")),
		},
		PayloadBytes: uint64(Int(t, 0, 1, "req.payload")),
		Priority:     uint32(Int(t, 0, int(p.Node.MaximumPriority), "req.priority")),
	}
	for _, tp := range p.Tenants {
		if tp.ID == rev.Tenant && req.Priority > tp.MaximumPriority && Chance(t, 3, 4, "req.priority.permitted") {
			req.Priority = tp.MaximumPriority
		}
	}
	if Chance(t, 1, 2, "req.wall.set") {
		req.RequestedBudget.WallTime = policy.Some(Pick(t, []time.Duration{time.Second, time.Hour, 100 * time.Millisecond, 20 * time.Millisecond}, "req.wall"))
	}
	if Chance(t, 1, 3, "req.deadline.set") {
		ahead := Pick(t, []int64{3000, 1000, 200, 50, 5}, "req.deadline") + int64(Int(t, 0, 3, "req.deadline.jitter"))
		req.Deadline = policy.Some(now.UnixMilli() + ahead)
	}
	if Chance(t, 1, 3, "req.break") {
		breakRequest(t, p, req, now)
	}
	if req.Handle != nil && Chance(t, 1, 3, "req.revision.carried") {
		// The request names no identity and leaves its handle to carry
		// the revision, as latentd's requests do (after any break, so
		// that a broken identity is not always the one taken away).
		req.Revision.RevisionIdentity = policy.RevisionIdentity{}
	}
	return req
}

// breakRequest applies one of the ways a request can be wrong.
func breakRequest(t *rapid.T, p *policy.NodeAdmissionPolicy, req *core.AdmissionRequest, now time.Time) {
	node := &p.Node
	tooLong := strings.Repeat("x", int(node.MaximumIdentifierBytes)+1)
	badIdentifiers := []string{"", "a b", "a\tb", "a\u2003b", "a\u0085b", "a\x01b", "a\x7fb", "a\xffb", "\xc3", "é\xa0", tooLong,
		strings.Repeat("é", int(node.MaximumIdentifierBytes)/2+1)}
	badID := func() string { return Pick(t, badIdentifiers, "bad_identifier") }
	badGenerated := []string{"", "r v", strings.Repeat("g", int(node.MaximumGeneratedIdentifierBytes)+1), "g\x00"}
	switch PickFlat(t, []string{
		"metadata-entries", "metadata-bytes", "metadata-at-bound", "activation-id", "subject", "tenant", "service", "rev-tenant", "rev-service",
		"rev-route", "rev-contract", "rev-function", "rev-id", "release-id", "egress", "storage", "outbound",
		"anonymous", "no-kind", "unknown-tenant", "other-tenant", "wrong-subject", "wrong-kind", "service-without-service",
		"claims", "node-priority", "tenant-priority", "forged-route", "forged-contract", "forged-function", "forged-revision",
		"forged-release", "forged-generation", "zero-fuel", "zero-memory", "zero-wall", "negative-wall", "huge-budget",
		"node-payload", "payload", "deadline-now", "deadline-past", "deadline-far-past", "deadline-far-future", "deadline-soon",
		"revision-attributes",
	}, "break") {
	case "metadata-entries":
		req.Attributes = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	case "metadata-bytes":
		req.Principal.Claims = map[string]string{"k": strings.Repeat("v", 16)}
	case "metadata-at-bound":
		if node.MaximumMetadataEntries > 0 && node.MaximumMetadataBytes > 0 {
			req.Attributes = map[string]string{"k": strings.Repeat("v", int(node.MaximumMetadataBytes)-1)}
		}
	case "activation-id":
		req.ActivationID = badID()
	case "subject":
		req.Principal.Subject = badID()
	case "tenant":
		req.Principal.Tenant = badID()
	case "service":
		if s := badID(); s != "" {
			req.Principal.Service = s
		}
	case "rev-tenant":
		req.Revision.Tenant = badID()
	case "rev-service":
		req.Revision.Service = badID()
	case "rev-route":
		req.Revision.Route = badID()
	case "rev-contract":
		req.Revision.Contract = badID()
	case "rev-function":
		req.Revision.Function = badID()
	case "rev-id":
		req.Revision.Revision = Pick(t, badGenerated, "bad_generated")
	case "release-id":
		req.Revision.Release = Pick(t, badGenerated, "bad_generated")
	case "egress":
		req.RequestedBudget.NetworkEgressBytes = 1
	case "storage":
		req.RequestedBudget.StorageBytes = 1
	case "outbound":
		req.RequestedBudget.OutboundCalls = 1
	case "anonymous":
		req.Principal.Kind = policy.AnonymousPrincipal
	case "no-kind":
		req.Principal.Kind = Pick(t, []policy.PrincipalKind{0, 7}, "kind")
	case "unknown-tenant":
		req.Principal.Tenant, req.Revision.Tenant = "hooli", "hooli"
	case "other-tenant":
		req.Principal.Tenant = Pick(t, tenants, "other_tenant")
	case "wrong-subject":
		req.Principal.Subject = "mallory"
	case "wrong-kind":
		if req.Principal.Kind == policy.UserPrincipal {
			req.Principal.Kind, req.Principal.Service = policy.ServicePrincipal, "svc-api"
		} else {
			req.Principal.Kind = policy.UserPrincipal
		}
	case "service-without-service":
		req.Principal.Service = ""
	case "claims":
		req.Principal.Subject = "mallory"
		req.Principal.Claims = map[string]string{"role": "admin"}
	case "node-priority":
		req.Priority = node.MaximumPriority + uint32(Int(t, 1, 2, "over"))
	case "tenant-priority":
		for _, tp := range p.Tenants {
			if tp.ID == req.Principal.Tenant {
				req.Priority = tp.MaximumPriority + 1
			}
		}
	case "forged-route":
		req.Revision.Route = Pick(t, []string{"r1", "r2", "r3"}, "route")
	case "forged-contract":
		req.Revision.Contract = "c.v2"
	case "forged-function":
		req.Revision.Function = "other"
	case "forged-revision":
		req.Revision.Revision = Pick(t, []string{"rev-r1-1", "rev-r2-2", "rev-forged"}, "revision")
	case "forged-release":
		req.Revision.Release = Pick(t, []string{"rel-r1-1", "rel-r1-2", "rel-forged"}, "release")
	case "forged-generation":
		req.Revision.Generation = uint64(Int(t, 0, 4, "generation"))
	case "zero-fuel":
		req.RequestedBudget.CPUFuel = 0
	case "zero-memory":
		req.RequestedBudget.MemoryBytes = 0
	case "zero-wall":
		req.RequestedBudget.WallTime = policy.Some[time.Duration](0)
	case "negative-wall":
		req.RequestedBudget.WallTime = policy.Some(-time.Duration(Int(t, 1, 1000, "negative")))
	case "huge-budget":
		req.RequestedBudget.CPUFuel, req.RequestedBudget.MemoryBytes = math.MaxUint64, math.MaxUint64
		req.RequestedBudget.WallTime = policy.Some[time.Duration](math.MaxInt64)
	case "node-payload":
		req.PayloadBytes = node.MaximumPayloadBytes + 1
	case "payload":
		req.PayloadBytes = uint64(Int(t, 0, 5, "payload"))
	case "deadline-now":
		req.Deadline = policy.Some(now.UnixMilli())
	case "deadline-past":
		req.Deadline = policy.Some(now.UnixMilli() - int64(Int(t, 1, 5000, "past")))
	case "deadline-far-past":
		req.Deadline = policy.Some[int64](math.MinInt64)
	case "deadline-far-future":
		req.Deadline = policy.Some[int64](math.MaxInt64)
	case "deadline-soon":
		req.Deadline = policy.Some(now.UnixMilli() + int64(Int(t, 1, 40, "soon")))
	case "revision-attributes":
		req.Revision.Attributes = map[string]string{"trust_class": "privileged"}
	}
}
