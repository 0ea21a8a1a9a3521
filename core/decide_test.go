package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

type row struct {
	code      Code
	scope     Scope
	dim       Dimension
	reason    Reason
	retryable bool
}

var accepted = row{}

func invalid(scope Scope, dim Dimension) row {
	return row{CodeInvalidArgument, scope, dim, ReasonIdentifierInvalid, false}
}

type decideCase struct {
	name   string
	policy func(*policy.NodeAdmissionPolicy)
	setup  func(t *testing.T, f *fixture)
	req    func(r *AdmissionRequest)
	atMs   int64
	want   row
}

// prepare builds the case's fixture and request.
func (tc decideCase) prepare(t *testing.T, id string) (*fixture, *AdmissionRequest) {
	t.Helper()
	f := newFixture(t, tc.policy)
	if tc.setup != nil {
		tc.setup(t, f)
	}
	req := request(id)
	if tc.req != nil {
		tc.req(req)
	}
	return f, req
}

// addRevision deploys a variant of the resize revision under another route.
func addRevision(route string, mutate func(*policy.RevisionPolicy)) func(t *testing.T, f *fixture) {
	return func(t *testing.T, f *fixture) {
		rev := resizeRevision()
		rev.Route = route
		p := resizePolicy()
		mutate(p)
		f.source.add(rev, p)
	}
}

func useRoute(route string) func(r *AdmissionRequest) {
	return func(r *AdmissionRequest) { r.Revision.Route = route }
}

func meta(n int, keyLen, valueLen int) map[string]string {
	m := map[string]string{}
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%0*d", keyLen, i)
		m[k] = strings.Repeat("v", valueLen)
	}
	return m
}

func decideCases() []decideCase {
	return []decideCase{
		{name: "a valid request is admitted", want: accepted},

		// Step 1: metadata (example policy: 8 entries, 256 bytes).
		{name: "metadata entries at the bound are accepted", req: func(r *AdmissionRequest) {
			r.Principal.Claims = meta(3, 2, 1)
			r.Attributes = meta(3, 2, 1)
			r.Revision.Attributes = meta(2, 2, 1)
		}, want: accepted},
		{name: "metadata entries over the bound across all three maps", req: func(r *AdmissionRequest) {
			r.Principal.Claims = meta(3, 2, 1)
			r.Attributes = meta(3, 2, 1)
			r.Revision.Attributes = meta(3, 2, 1)
		}, want: row{CodeInvalidArgument, ScopeRequest, DimMetadataEntries, ReasonMetadataTooLarge, false}},
		{name: "metadata bytes at the bound are accepted", req: func(r *AdmissionRequest) {
			r.Attributes = meta(2, 28, 100) // 2 * 128 = 256
		}, want: accepted},
		{name: "metadata bytes over the bound", req: func(r *AdmissionRequest) {
			r.Attributes = meta(1, 28, 100)
			r.Principal.Claims = map[string]string{"k": strings.Repeat("x", 128)} // 128 + 129 = 257
		}, want: row{CodeInvalidArgument, ScopeRequest, DimMetadataBytes, ReasonMetadataTooLarge, false}},
		{name: "metadata entries are checked before identifiers", req: func(r *AdmissionRequest) {
			r.ActivationID = ""
			r.Attributes = meta(9, 2, 1)
		}, want: row{CodeInvalidArgument, ScopeRequest, DimMetadataEntries, ReasonMetadataTooLarge, false}},

		// Step 2: identifiers (example policy: 64 bytes; generated 96).
		{name: "activation ID empty", req: func(r *AdmissionRequest) { r.ActivationID = "" }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "activation ID at the length bound is accepted", req: func(r *AdmissionRequest) { r.ActivationID = strings.Repeat("a", 64) }, want: accepted},
		{name: "activation ID over the length bound", req: func(r *AdmissionRequest) { r.ActivationID = strings.Repeat("a", 65) }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "activation ID with a space", req: func(r *AdmissionRequest) { r.ActivationID = "a b" }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "activation ID with a unicode space", req: func(r *AdmissionRequest) { r.ActivationID = "a\u2003b" }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "activation ID with a control character", req: func(r *AdmissionRequest) { r.ActivationID = "a\x01b" }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "activation ID not UTF-8", req: func(r *AdmissionRequest) { r.ActivationID = "a\xffb" }, want: invalid(ScopeRequest, DimActivationID)},
		{name: "principal subject invalid", req: func(r *AdmissionRequest) { r.Principal.Subject = "al ice" }, want: invalid(ScopePrincipal, DimSubject)},
		{name: "principal tenant invalid", req: func(r *AdmissionRequest) { r.Principal.Tenant = "" }, want: invalid(ScopePrincipal, DimTenant)},
		{name: "principal service invalid when present", req: func(r *AdmissionRequest) { r.Principal.Service = "x\ty" }, want: invalid(ScopePrincipal, DimService)},
		{name: "revision tenant invalid", req: func(r *AdmissionRequest) { r.Revision.Tenant = "" }, want: invalid(ScopeRevision, DimTenant)},
		{name: "revision service invalid", req: func(r *AdmissionRequest) { r.Revision.Service = "a b" }, want: invalid(ScopeRevision, DimService)},
		{name: "revision route invalid", req: func(r *AdmissionRequest) { r.Revision.Route = "" }, want: invalid(ScopeRevision, DimRoute)},
		{name: "revision contract invalid", req: func(r *AdmissionRequest) { r.Revision.Contract = "\n" }, want: invalid(ScopeRevision, DimContract)},
		{name: "revision function invalid", req: func(r *AdmissionRequest) { r.Revision.Function = strings.Repeat("f", 65) }, want: invalid(ScopeRevision, DimFunction)},
		{name: "revision ID over the generated bound", req: func(r *AdmissionRequest) { r.Revision.Revision = strings.Repeat("r", 97) }, want: invalid(ScopeRevision, DimRevisionID)},
		{name: "release ID invalid", req: func(r *AdmissionRequest) { r.Revision.Release = "" }, want: invalid(ScopeRevision, DimReleaseID)},
		{name: "network egress budget is unsupported", req: func(r *AdmissionRequest) { r.RequestedBudget.NetworkEgressBytes = 1 },
			want: row{CodeInvalidArgument, ScopeRequest, DimNetworkEgressBytes, ReasonBudgetDimensionUnsupported, false}},
		{name: "storage budget is unsupported", req: func(r *AdmissionRequest) { r.RequestedBudget.StorageBytes = 1 },
			want: row{CodeInvalidArgument, ScopeRequest, DimStorageBytes, ReasonBudgetDimensionUnsupported, false}},
		{name: "outbound calls budget is unsupported", req: func(r *AdmissionRequest) { r.RequestedBudget.OutboundCalls = 1 },
			want: row{CodeInvalidArgument, ScopeRequest, DimOutboundCalls, ReasonBudgetDimensionUnsupported, false}},

		// Step 3: principal.
		{name: "anonymous principal", req: func(r *AdmissionRequest) { r.Principal.Kind = policy.AnonymousPrincipal }, want: denied()},
		{name: "principal without a kind", req: func(r *AdmissionRequest) { r.Principal.Kind = 0 }, want: denied()},
		{name: "tenant not configured", req: func(r *AdmissionRequest) { r.Principal.Tenant = "hooli"; r.Revision.Tenant = "hooli" }, want: denied()},
		{name: "principal tenant differs from revision tenant", req: func(r *AdmissionRequest) {
			r.Principal.Tenant, r.Principal.Subject = "globex", "bob"
		}, want: denied()},
		{name: "subject not on the allowlist", req: func(r *AdmissionRequest) { r.Principal.Subject = "mallory" }, want: denied()},
		{name: "subject allowlisted for another kind", req: func(r *AdmissionRequest) {
			r.Principal.Kind, r.Principal.Service = policy.ServicePrincipal, "svc"
		}, want: denied()},
		{name: "service principal without a service identity", req: func(r *AdmissionRequest) {
			r.Principal.Kind, r.Principal.Subject = policy.ServicePrincipal, "billing"
		}, want: denied()},
		{name: "service principal with a service identity is accepted", req: func(r *AdmissionRequest) {
			r.Principal.Kind, r.Principal.Subject, r.Principal.Service = policy.ServicePrincipal, "billing", "billing-api"
		}, want: accepted},
		{name: "claims grant nothing", req: func(r *AdmissionRequest) {
			r.Principal.Subject = "mallory"
			r.Principal.Claims = map[string]string{"role": "admin", "tenant": "acme"}
		}, want: denied()},

		// Step 4: priority (node 9, acme 7).
		{name: "priority above the node maximum", req: func(r *AdmissionRequest) { r.Priority = 10 },
			want: row{CodePermissionDenied, ScopeNode, DimPriority, ReasonPriorityNotAuthorized, false}},
		{name: "priority above the tenant maximum", req: func(r *AdmissionRequest) { r.Priority = 8 },
			want: row{CodePermissionDenied, ScopeTenant, DimPriority, ReasonPriorityNotAuthorized, false}},
		{name: "priority at the tenant maximum is accepted", req: func(r *AdmissionRequest) { r.Priority = 7 }, want: accepted},

		// Step 5: the pinned tuple.
		{name: "revision not in the view", req: func(r *AdmissionRequest) { r.Revision.Service = "nosuch" }, want: missingRevision()},
		{name: "route differs", req: func(r *AdmissionRequest) { r.Revision.Route = "other" }, want: missingRevision()},
		{name: "contract differs", req: func(r *AdmissionRequest) { r.Revision.Contract = "img.v2" }, want: missingRevision()},
		{name: "function differs", req: func(r *AdmissionRequest) { r.Revision.Function = "crop" }, want: missingRevision()},
		{name: "revision ID differs", req: func(r *AdmissionRequest) { r.Revision.Revision = "rev-forged" }, want: missingRevision()},
		{name: "release ID differs", req: func(r *AdmissionRequest) { r.Revision.Release = "rel-forged" }, want: missingRevision()},
		{name: "generation differs", req: func(r *AdmissionRequest) { r.Revision.Generation = 2 }, want: missingRevision()},
		{name: "attributes do not affect the tuple", req: func(r *AdmissionRequest) {
			r.Revision.Attributes = map[string]string{"trust_class": "privileged"}
		}, want: accepted},

		// Step 6: requirements and placement.
		{name: "backend not supported", setup: addRevision("gpu", func(p *policy.RevisionPolicy) { p.Backend = "gpu" }), req: useRoute("gpu"),
			want: unsupported(DimBackend)},
		{name: "state model not supported", setup: addRevision("st", func(p *policy.RevisionPolicy) { p.StateModel = "stateful" }), req: useRoute("st"),
			want: unsupported(DimStateModel)},
		{name: "threading offered by no cell class", policy: func(p *policy.NodeAdmissionPolicy) {
			for i := range p.CellClasses {
				p.CellClasses[i].Threading = []string{"single"}
			}
		}, setup: addRevision("mt", func(p *policy.RevisionPolicy) { p.Threading = policy.MultiThreaded }), req: useRoute("mt"),
			want: unsupported(DimThreading)},
		{name: "feature offered by no cell class", setup: addRevision("gc", func(p *policy.RevisionPolicy) { p.Features = []string{"simd", "gc"} }), req: useRoute("gc"),
			want: unsupported(DimFeatures)},
		{name: "backend is checked before placement", setup: addRevision("both", func(p *policy.RevisionPolicy) {
			p.Backend = "gpu"
			p.Placement.Architectures = []string{"aarch64"}
		}), req: useRoute("both"), want: unsupported(DimBackend)},
		{name: "architecture outside the restriction", setup: addRevision("arm", func(p *policy.RevisionPolicy) { p.Placement.Architectures = []string{"aarch64"} }),
			req: useRoute("arm"), want: row{CodeAdmissionRejected, ScopePlacement, DimArchitecture, ReasonPlacementNotCompatible, false}},
		{name: "region outside the restriction", setup: addRevision("us", func(p *policy.RevisionPolicy) { p.Placement.Regions = []string{"us-east"} }),
			req: useRoute("us"), want: row{CodeAdmissionRejected, ScopePlacement, DimRegion, ReasonPlacementNotCompatible, false}},
		{name: "zone outside the restriction", setup: addRevision("zoned", func(p *policy.RevisionPolicy) {
			p.Placement.Regions = []string{"eu-west"}
			p.Placement.Zones = []string{"eu-west-1b"}
		}), req: useRoute("zoned"), want: row{CodeAdmissionRejected, ScopePlacement, DimZone, ReasonPlacementNotCompatible, false}},
		{name: "placement inside every restriction is accepted", setup: addRevision("here", func(p *policy.RevisionPolicy) {
			p.Placement = policy.PlacementRestriction{Architectures: []string{"aarch64", "x86_64"}, Regions: []string{"eu-west"}, Zones: []string{"eu-west-1a"}}
		}), req: useRoute("here"), want: accepted},

		// Step 7: trust class.
		{name: "trust class not permitted to the tenant", setup: addRevision("priv", func(p *policy.RevisionPolicy) { p.TrustClass = "privileged" }),
			req: useRoute("priv"), want: row{CodePermissionDenied, ScopeTenant, DimTrustClass, ReasonTrustClassNotAuthorized, false}},
		{name: "trust class not configured", setup: addRevision("ghost", func(p *policy.RevisionPolicy) { p.TrustClass = "ghost" }),
			req: useRoute("ghost"), want: row{CodePermissionDenied, ScopeTenant, DimTrustClass, ReasonTrustClassNotAuthorized, false}},

		// Step 8: the grant.
		{name: "zero CPU fuel requested", req: func(r *AdmissionRequest) { r.RequestedBudget.CPUFuel = 0 }, want: infeasible(DimCPUFuel)},
		{name: "zero memory requested", req: func(r *AdmissionRequest) { r.RequestedBudget.MemoryBytes = 0 }, want: infeasible(DimMemoryBytes)},
		{name: "zero wall time requested", req: func(r *AdmissionRequest) { r.RequestedBudget.WallTime = policy.Some(time.Duration(0)) }, want: infeasible(DimWallTime)},
		{name: "zero fuel from a ceiling", setup: addRevision("nofuel", func(p *policy.RevisionPolicy) { p.CapsuleCeiling.CPUFuel = policy.Some[uint64](0) }),
			req: useRoute("nofuel"), want: infeasible(DimCPUFuel)},
		{name: "zero node fuel ceiling", policy: func(p *policy.NodeAdmissionPolicy) { p.Node.BudgetCeiling.CPUFuel = 0 }, want: infeasible(DimCPUFuel)},

		// Step 9: cell class.
		{name: "no class holds the granted memory", setup: addRevision("huge", func(p *policy.RevisionPolicy) {
			p.CapsuleCeiling, p.DeploymentCeiling = policy.Ceiling{}, policy.Ceiling{}
		}), req: func(r *AdmissionRequest) {
			r.Revision.Route = "huge"
			r.RequestedBudget.MemoryBytes = 900 << 20
		}, want: row{CodeAdmissionRejected, ScopeCellClass, DimMemoryBytes, ReasonNoCompatibleCell, false}},
		{name: "compatible class not permitted to the tenant", setup: addRevision("threads", func(p *policy.RevisionPolicy) {
			p.Threading = policy.MultiThreaded
			p.Features = []string{"threads"}
		}), req: useRoute("threads"), want: row{CodePermissionDenied, ScopeTenant, DimCellClass, ReasonCellClassNotAuthorized, false}},
		{name: "compatible class not permitted to the trust class", policy: func(p *policy.NodeAdmissionPolicy) {
			p.Tenants[0].CellClasses = append(p.Tenants[0].CellClasses, "extra-large")
		}, setup: addRevision("threads", func(p *policy.RevisionPolicy) {
			p.Threading = policy.MultiThreaded
			p.Features = []string{"threads"}
		}), req: useRoute("threads"), want: row{CodePermissionDenied, ScopeTrustClass, DimCellClass, ReasonCellClassNotAuthorized, false}},

		// Step 10: payload (node 1 MiB, acme 256 KiB).
		{name: "payload over the node maximum", req: func(r *AdmissionRequest) { r.PayloadBytes = 1<<20 + 1 },
			want: row{CodeResourceExhausted, ScopeNode, DimPayloadBytes, ReasonPayloadTooLarge, false}},
		{name: "payload over the tenant maximum", req: func(r *AdmissionRequest) { r.PayloadBytes = 256<<10 + 1 },
			want: row{CodeResourceExhausted, ScopeTenant, DimPayloadBytes, ReasonPayloadTooLarge, false}},
		{name: "payload equal to the tenant maximum is accepted", req: func(r *AdmissionRequest) { r.PayloadBytes = 256 << 10 }, want: accepted},

		// Step 11: the caller's deadline.
		{name: "caller deadline equal to now", atMs: 100, req: func(r *AdmissionRequest) { r.Deadline = policy.Some(at(100).UnixMilli()) },
			want: row{CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false}},
		{name: "caller deadline before now", atMs: 100, req: func(r *AdmissionRequest) { r.Deadline = policy.Some(at(-5000).UnixMilli()) },
			want: row{CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false}},
		{name: "caller deadline is checked before load", atMs: 100, setup: func(t *testing.T, f *fixture) { f.load.Clear() },
			req:  func(r *AdmissionRequest) { r.Deadline = policy.Some(at(100).UnixMilli()) },
			want: row{CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false}},
		{name: "caller deadline far in the future is accepted", req: func(r *AdmissionRequest) { r.Deadline = policy.Some[int64](1 << 62) }, want: accepted},

		// Step 12: load.
		{name: "no load sample", setup: func(t *testing.T, f *fixture) { f.load.Clear() }, want: unavailable()},
		{name: "sample exactly at the maximum age is accepted", atMs: 2000, want: accepted},
		{name: "stale sample", atMs: 2001, want: unavailable()},
		{name: "future-dated sample", setup: func(t *testing.T, f *fixture) { f.publish(t, 2, 50, 0.1, 0.1) }, atMs: 49, want: unavailable()},
		{name: "CPU pressure at the threshold", setup: func(t *testing.T, f *fixture) { f.publish(t, 2, 0, 0.9, 0.1) },
			want: row{CodeResourceExhausted, ScopeNode, DimCPUPressure, ReasonNodeOverloaded, true}},
		{name: "CPU pressure just below the threshold is accepted", setup: func(t *testing.T, f *fixture) { f.publish(t, 2, 0, 0.8999, 0.1) }, want: accepted},
		{name: "memory pressure at the threshold", setup: func(t *testing.T, f *fixture) { f.publish(t, 2, 0, 0.1, 0.85) },
			want: row{CodeResourceExhausted, ScopeNode, DimMemoryPressure, ReasonNodeOverloaded, true}},
		{name: "CPU pressure is reported before memory", setup: func(t *testing.T, f *fixture) { f.publish(t, 2, 0, 1, 1) },
			want: row{CodeResourceExhausted, ScopeNode, DimCPUPressure, ReasonNodeOverloaded, true}},
		{name: "payload is checked before load", setup: func(t *testing.T, f *fixture) { f.load.Clear() },
			req:  func(r *AdmissionRequest) { r.PayloadBytes = 1 << 30 },
			want: row{CodeResourceExhausted, ScopeNode, DimPayloadBytes, ReasonPayloadTooLarge, false}},

		// Step 13: feasibility (service 100ms, minimum 20ms, margin 10ms).
		{name: "remaining equal to required with an empty backlog", req: func(r *AdmissionRequest) {
			r.RequestedBudget.WallTime = policy.Some(30 * time.Millisecond)
		}, want: row{CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false}},
		{name: "remaining just over required is accepted", req: func(r *AdmissionRequest) {
			r.RequestedBudget.WallTime = policy.Some(31 * time.Millisecond)
		}, want: accepted},
		{name: "caller deadline shortens the remaining time", req: func(r *AdmissionRequest) {
			r.Deadline = policy.Some(at(30).UnixMilli())
		}, want: row{CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false}},
		{name: "observed queue delay makes it retryably infeasible", setup: func(t *testing.T, f *fixture) {
			s := LoadSample{Sequence: 2, ObservedAt: at(0), CPUPressure: 0.1, MemoryPressure: 0.1}
			s.QueueDelay[policy.Small] = 100 * time.Millisecond
			if err := f.load.Publish(s); err != nil {
				t.Fatal(err)
			}
		}, req: func(r *AdmissionRequest) { r.RequestedBudget.WallTime = policy.Some(130 * time.Millisecond) },
			want: row{CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, true}},
		{name: "observed delay of another class does not count", setup: func(t *testing.T, f *fixture) {
			s := LoadSample{Sequence: 2, ObservedAt: at(0), CPUPressure: 0.1, MemoryPressure: 0.1}
			s.QueueDelay[policy.Tiny] = time.Hour
			if err := f.load.Publish(s); err != nil {
				t.Fatal(err)
			}
		}, req: func(r *AdmissionRequest) { r.RequestedBudget.WallTime = policy.Some(31 * time.Millisecond) }, want: accepted},
		{name: "feasibility arithmetic overflow rejects", policy: func(p *policy.NodeAdmissionPolicy) {
			p.Node.Deadline.EstimatedServiceTime = time.Duration(1<<63 - 1)
			p.CellClasses[1].Parallelism = 1
		}, setup: func(t *testing.T, f *fixture) {
			if _, err := f.ctl.AdmitAt(request("first"), at(0)); err != nil {
				t.Fatal(err)
			}
		}, want: row{CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false}},
	}
}

func denied() row {
	return row{CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false}
}
func missingRevision() row {
	return row{CodeAdmissionRejected, ScopeRevision, DimRevision, ReasonRevisionNotAvailable, false}
}
func unsupported(d Dimension) row {
	return row{CodeAdmissionRejected, ScopeRevision, d, ReasonUnsupportedExecutionRequirement, false}
}
func infeasible(d Dimension) row {
	return row{CodeAdmissionRejected, ScopeRequest, d, ReasonBudgetInfeasible, false}
}
func unavailable() row {
	return row{CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true}
}

func TestDecisionTable(t *testing.T) {
	for _, tc := range decideCases() {
		t.Run(tc.name, func(t *testing.T) {
			f, req := tc.prepare(t, "act-1")
			before := f.provider.NodeSnapshot()
			p, err := f.ctl.AdmitAt(req, at(tc.atMs))
			if tc.want == accepted {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if !p.Release() {
					t.Fatal("release returned nothing")
				}
				return
			}
			wantError(t, err, tc.want.code, tc.want.scope, tc.want.dim, tc.want.reason, tc.want.retryable)
			if p != nil {
				t.Fatal("a rejection returned a permit")
			}
			if after := f.provider.NodeSnapshot(); after != before {
				t.Fatalf("a rejection moved the ledger: %+v -> %+v", before, after)
			}
			var e Error
			if !errors.As(fmt.Errorf("wrapped: %w", err), &e) || e != err {
				t.Fatal("errors.As does not find the Error")
			}
		})
	}
}

// TestRejectionsAreSanitized checks that no rejection text carries any of
// the request's identifiers, subjects, tenants, attribute values or
// numbers, and that every error is one of the preallocated values.
func TestRejectionsAreSanitized(t *testing.T) {
	known := map[Error]bool{}
	for _, e := range AllErrors() {
		known[e] = true
		if strings.ContainsAny(e.Error(), "0123456789") {
			t.Errorf("error text carries a number: %q", e)
		}
	}
	for _, tc := range decideCases() {
		if tc.want == accepted {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			f, req := tc.prepare(t, "secret-activation-7731")
			req.Attributes = mergeSecret(req.Attributes)
			_, err := f.ctl.AdmitAt(req, at(tc.atMs))
			e, ok := err.(Error)
			if !ok {
				t.Fatalf("got %v", err)
			}
			if !known[e] {
				t.Fatalf("error %v is not preallocated", e)
			}
			text := err.Error()
			for _, s := range requestStrings(req) {
				if s != "" && len(s) > 2 && strings.Contains(text, s) {
					t.Errorf("error %q carries request string %q", text, s)
				}
			}
		})
	}
}

func mergeSecret(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	if len(out) < 7 {
		out["x-secret"] = "tenant-secret-value"
	}
	return out
}

func requestStrings(r *AdmissionRequest) []string {
	s := []string{r.ActivationID, r.Principal.Subject, r.Principal.Tenant, r.Principal.Service,
		r.Revision.Tenant, r.Revision.Service, r.Revision.Route, r.Revision.Contract, r.Revision.Function,
		r.Revision.Revision, r.Revision.Release, "x86_64", "eu-west", "standard", "batch", "wasm", "simd"}
	for _, m := range []map[string]string{r.Attributes, r.Principal.Claims, r.Revision.Attributes} {
		for k, v := range m {
			s = append(s, k, v)
		}
	}
	return s
}
