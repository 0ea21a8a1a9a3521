package pipeline_test

import (
	"context"
	"fmt"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// oneRevision is a RevisionPolicySource with one revision; a node uses
// the catalog's pin.
type oneRevision struct {
	rev    policy.ResolvedRevision
	policy policy.RevisionPolicy
}

func (s *oneRevision) RevisionPolicy(r *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if r.Tenant != s.rev.Tenant || r.Service != s.rev.Service || r.Route != s.rev.Route || r.Contract != s.rev.Contract ||
		r.Function != s.rev.Function || r.Revision != s.rev.Revision || r.Release != s.rev.Release || r.Generation != s.rev.Generation {
		return nil, false
	}
	return &s.policy, true
}

func exampleNodePolicy() *policy.NodeAdmissionPolicy {
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
		CellClasses:  []policy.CellClassPolicy{{Class: "small", MemoryBytes: 64 << 20, Parallelism: 2, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{{Name: "standard", CellClasses: []string{"small"}, Limits: limits}},
		Tenants: []policy.TenantPolicy{{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}},
			TrustClasses: []string{"standard"}, CellClasses: []string{"small"}, MaximumPriority: 9, MaximumPayloadBytes: 1 << 20, Limits: limits}},
	}
}

// Example wires admission to the downstream: the pool is sized from the
// same policy as admission, the scheduler owns each permit until it is
// started or dropped, and the runner releases the reservation only after
// the guest has stopped and its cell is back.
func Example() {
	provider, err := core.NewLocalQuotaProvider(exampleNodePolicy())
	if err != nil {
		panic(err)
	}
	rev := policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: "acme", Service: "thumbs", Route: "resize", Contract: "img.v1",
		Function: "resize", Revision: "rev-1", Release: "rel-1", Generation: 1}}
	source := &oneRevision{rev: rev, policy: policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm",
		Threading: policy.SingleThreaded, StateModel: "stateless"}}
	load := core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, nil)
	controller := provider.Controller(core.ControllerConfig{Source: source, Load: load})

	backend := synthetic.New(synthetic.ByInput(map[string]synthetic.Behavior{
		"resize": {Fuel: 1000, Output: []byte("thumbnail")},
		"flaky":  {Exit: runner.ExitTrapped, UncertainCleanup: true},
	}))
	node, err := pipeline.New(provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": backend}})
	if err != nil {
		panic(err)
	}
	// The sampler reads the pipeline's queue delays (a class that lost
	// cells carries a conservative one) and publishes into the load state.
	now := time.Now()
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: now, CPUPressure: 0.2, MemoryPressure: 0.3, QueueDelay: node.QueueDelay(now)}); err != nil {
		panic(err)
	}

	call := func(id, input string) {
		report, err := node.Invoke(context.Background(), controller, &core.AdmissionRequest{
			ActivationID:    id,
			Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
			Revision:        rev,
			RequestedBudget: policy.Budget{CPUFuel: 5e8, MemoryBytes: 16 << 20},
			PayloadBytes:    512,
		}, []byte(input))
		fmt.Printf("%s: %v, cell %v, output %q, err %v\n", id, report.Outcome, report.Disposition, report.Output, err)
	}
	call("act-1", "resize")
	call("act-2", "flaky")

	// Drain waits for every goroutine; then nothing may be held.
	node.Drain()
	fmt.Println("residue:", node.Counters().Residue())
	fmt.Println("small cells usable:", node.Pool().Stats(policy.Small).Usable)
	// Output:
	// act-1: succeeded, cell released, output "thumbnail", err <nil>
	// act-2: trapped, cell quarantined, output "", err runner: guest trapped
	// residue: []
	// small cells usable: 1
}
