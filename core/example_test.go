package core_test

import (
	"fmt"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// staticSource is a one-revision RevisionPolicySource; the catalog's Pin
// plays this role in a node.
type staticSource struct {
	rev    policy.ResolvedRevision
	policy policy.RevisionPolicy
}

func (s *staticSource) RevisionPolicy(r *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if r.Tenant != s.rev.Tenant || r.Service != s.rev.Service || r.Route != s.rev.Route || r.Contract != s.rev.Contract ||
		r.Function != s.rev.Function || r.Revision != s.rev.Revision || r.Release != s.rev.Release || r.Generation != s.rev.Generation {
		return nil, false
	}
	return &s.policy, true
}

func examplePolicy() *policy.NodeAdmissionPolicy {
	limits := policy.Limits{MaxLiveActivations: 8, MaxQueuedReservations: 8, MaxReservedCPUFuel: 1e10, MaxReservedMemoryBytes: 1 << 30}
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement:     policy.Placement{Architecture: "x86_64", Region: "eu-west", Zone: "eu-west-1a"},
			Backends:      []string{"wasm"},
			StateModels:   []string{"stateless"},
			BudgetCeiling: policy.NodeBudgetCeiling{CPUFuel: 1e9, MemoryBytes: 64 << 20, WallTime: 30 * time.Second},
			Limits:        limits, MaximumPayloadBytes: 1 << 20, MaximumPriority: 9,
			MaximumIdentifierBytes: 64, MaximumGeneratedIdentifierBytes: 96,
			MaximumMetadataEntries: 8, MaximumMetadataBytes: 1024,
			Overload: policy.OverloadPolicy{CPUThreshold: 0.9, MemoryThreshold: 0.9, MaximumObservationAge: 2 * time.Second},
			Deadline: policy.DeadlinePolicy{EstimatedServiceTime: 100 * time.Millisecond, MinimumExecutionTime: 20 * time.Millisecond, SafetyMargin: 10 * time.Millisecond},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "default", MinPriority: 0, MaxPriority: 9, MaxQueued: 8}},
		CellClasses:  []policy.CellClassPolicy{{Class: "small", MemoryBytes: 64 << 20, Parallelism: 4, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{{Name: "standard", CellClasses: []string{"small"}, Limits: limits}},
		Tenants: []policy.TenantPolicy{{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}},
			TrustClasses: []string{"standard"}, CellClasses: []string{"small"}, MaximumPriority: 9, MaximumPayloadBytes: 1 << 20, Limits: limits}},
	}
}

// Example shows the lifecycle of one activation: admit, start once a cell
// is leased, release when the guest has stopped.
func Example() {
	provider, err := core.NewLocalQuotaProvider(examplePolicy())
	if err != nil {
		panic(err)
	}
	rev := policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: "acme", Service: "thumbs", Route: "resize", Contract: "img.v1",
		Function: "resize", Revision: "rev-1", Release: "rel-1", Generation: 1}}
	source := &staticSource{rev: rev, policy: policy.RevisionPolicy{
		TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
		DeploymentCeiling: policy.Ceiling{WallTime: policy.Some(5 * time.Second)},
	}}
	load := core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, nil)
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.2, MemoryPressure: 0.3}); err != nil {
		panic(err)
	}
	controller := provider.Controller(core.ControllerConfig{Source: source, Load: load})

	permit, err := controller.Admit(&core.AdmissionRequest{
		ActivationID:    "act-1",
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision:        rev,
		RequestedBudget: policy.Budget{CPUFuel: 5e8, MemoryBytes: 16 << 20},
		PayloadBytes:    512,
		Priority:        5,
	})
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	o := permit.Grant().Obligations
	fmt.Println("admitted into", o.CellClass, "cell, queue", o.QueueClass, "with", permit.Grant().Budget.WallTime.Value)

	// The scheduler checks the deadline right before leasing a cell, then
	// consumes the queued permit.
	if err := permit.EnsureSchedulableAt(time.Now()); err != nil {
		permit.Release()
		return
	}
	execution, err := permit.StartExecution()
	if err != nil {
		return // the permit has been released
	}
	fmt.Println("queued after start:", provider.NodeSnapshot().Queued)

	// ... run the guest, finalize accounting, release the cell ...
	execution.Release()
	fmt.Println("live after release:", provider.NodeSnapshot().Live)

	// A second request with a forged revision is rejected with a
	// structured, sanitized error.
	forged := rev
	forged.Revision = "rev-forged"
	_, err = controller.Admit(&core.AdmissionRequest{ActivationID: "act-2",
		Principal: core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision:  forged, RequestedBudget: policy.Budget{CPUFuel: 1, MemoryBytes: 1}})
	fmt.Println(err)
	// Output:
	// admitted into small cell, queue default with 5s
	// queued after start: 0
	// live after release: 0
	// admission.limit: admission-rejected scope=revision dimension=revision reason=revision-not-available retryable=false
}
