package core

import (
	"fmt"
	"sync"
	"testing"

	"latent.dev/admission/policy"
)

// derived is the requirements the provider's policy derives afresh.
func derived(pr *LocalQuotaProvider, id *policy.RevisionIdentity, p *policy.RevisionPolicy) policy.Requirements {
	return pr.policy.Requirements(id.Tenant, p)
}

// requirementIdentities are the identities of requirementPolicies'
// records: of the fixture's tenants, and of one the node does not know.
func requirementIdentities(n int) []*policy.RevisionIdentity {
	out := make([]*policy.RevisionIdentity, n)
	for i := range out {
		out[i] = &policy.RevisionIdentity{Tenant: [...]string{"acme", "globex", "nobody"}[i%3]}
	}
	return out
}

// requirementPolicies is a spread of revision policies that pass and fail
// step 6 at each check, with known and unknown trust classes.
func requirementPolicies(n int) []*policy.RevisionPolicy {
	out := make([]*policy.RevisionPolicy, n)
	for i := range out {
		p := resizePolicy()
		switch i % 9 {
		case 1:
			p.Backend = "jvm"
		case 2:
			p.StateModel = "durable"
		case 3:
			p.Threading = policy.MultiThreaded
		case 4:
			p.Features = []string{"simd", "gpu"}
		case 5:
			p.Features = []string{"threads", "simd"}
		case 6:
			p.Placement.Architectures = []string{"riscv"}
		case 7:
			p.TrustClass = fmt.Sprintf("class-%d", i)
		case 8:
			p.Placement.Regions = []string{"nowhere"}
		}
		out[i] = p
	}
	return out
}

// TestRecordRequirements: through a record's slot, every policy gets
// what deriving afresh gives, on the fill and on every later read; a
// provider finds another provider's requirements in the slot and
// replaces them with its own; a read that finds its own allocates
// nothing.
func TestRecordRequirements(t *testing.T) {
	pr := newFixture(t, nil).provider
	other := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Backends = []string{"jvm"} }).provider
	pols, ids := requirementPolicies(18), requirementIdentities(18)
	slots := make([]policy.RecordSlot, len(pols))
	for round := 0; round < 3; round++ {
		for i, p := range pols {
			for _, prov := range []*LocalQuotaProvider{pr, other} {
				got := slots[i].For(prov.policy, ids[i].Tenant, p)
				if *got != derived(prov, ids[i], p) {
					t.Fatalf("round %d, policy %d: slot %+v, derived %+v", round, i, *got, derived(prov, ids[i], p))
				}
			}
		}
	}
	first := slots[5].For(pr.policy, ids[5].Tenant, pols[5])
	if again := slots[5].For(pr.policy, ids[5].Tenant, pols[5]); again != first {
		t.Fatal("a filled slot was derived again")
	}
	if n := testing.AllocsPerRun(100, func() { slots[5].For(pr.policy, ids[5].Tenant, pols[5]) }); n != 0 {
		t.Fatalf("reading a filled slot allocates %v objects", n)
	}
}

// TestRecordRequirementsUnderConcurrentFills races readers and fillers
// on shared slots; every answer must be the derivation of the policy
// asked about (and -race must find nothing).
func TestRecordRequirementsUnderConcurrentFills(t *testing.T) {
	pr := newFixture(t, nil).provider
	pols, ids := requirementPolicies(27), requirementIdentities(27)
	slots := make([]policy.RecordSlot, len(pols))
	want := make([]policy.Requirements, len(pols))
	for i, p := range pols {
		want[i] = derived(pr, ids[i], p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; n < 20000; n++ {
				i := (n*7 + g*13) % len(pols)
				if got := slots[i].For(pr.policy, ids[i].Tenant, pols[i]); *got != want[i] {
					errs <- fmt.Sprintf("policy %d: %+v, want %+v", i, *got, want[i])
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
