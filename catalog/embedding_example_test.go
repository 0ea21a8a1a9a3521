package catalog_test

import (
	"fmt"
	"os"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Example_embedding is the whole flow of a node: one provider for the
// node's policy, a catalog, and for each request a pin, a resolution with
// the request's routing key (an identity and a handle), a controller over
// that pin, then admit, start and release.
func Example_embedding() {
	// Once per node: the policy (validated before anything is kept), the
	// load state a trusted sampler publishes into, and the catalog.
	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		panic(err)
	}
	nodePolicy, err := policy.DecodePolicy(data)
	if err != nil {
		panic(err)
	}
	provider, err := core.NewLocalQuotaProvider(nodePolicy)
	if err != nil {
		panic(err)
	}
	load := core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, nil)
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.3, MemoryPressure: 0.4}); err != nil {
		panic(err)
	}
	deployments := catalog.New(catalog.Capacity{MaxRevisions: 100, MaxPolicyBytes: 1 << 20})
	if _, err := deployments.Deploy(thumbs(4)); err != nil {
		panic(err)
	}
	node := provider.Controller(core.ControllerConfig{Load: load})

	// Per request: resolve and admit against the same pin. The handle is
	// the pin's own record of the revision and carries it: the request
	// names no identity, and admission through the same pin compares
	// nothing.
	pin := deployments.Pin()
	_, handle, err := pin.Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, "user-42")
	if err != nil {
		fmt.Println(core.ErrRevisionNotAvailable) // what the caller sees
		return
	}
	permit, err := node.WithPolicySource(pin).Admit(&core.AdmissionRequest{
		ActivationID:    "act-7",
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Handle:          handle,
		RequestedBudget: policy.Budget{CPUFuel: 500_000_000, MemoryBytes: 16 << 20},
		PayloadBytes:    2048,
		Priority:        3,
	})
	if err != nil {
		fmt.Println("rejected:", err)
		return
	}
	o := permit.Grant().Obligations
	fmt.Println("cell", o.CellClass, "queue", o.QueueClass, "trust", o.TrustClass, "call depth", o.CallDepthLimit)

	// The scheduler owns the permit from here: it checks the deadline right
	// before leasing a cell, then starts; the executing goroutine releases.
	if err := permit.EnsureSchedulableAt(time.Now()); err != nil {
		permit.Release()
		return
	}
	execution, err := permit.StartExecution()
	if err != nil {
		return // the permit was released; release the cell lease too
	}
	execution.Release()
	fmt.Println("live after release:", provider.NodeSnapshot().Live)
	// Output:
	// cell tiny queue batch trust standard call depth 4
	// live after release: 0
}
