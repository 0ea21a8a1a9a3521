package core

import (
	"fmt"
	"sync"
	"testing"

	"latent.dev/admission/policy"
)

// unpacked reads a packed value back through its methods.
func unpacked(w packedRequirements) requirements {
	v := requirements{err: w.err(), features: w.features, cells: w.cells()}
	v.trust, v.trustKnown = w.trust()
	return v
}

// requirementPolicies is a spread of revision policies that pass and fail
// step 6 at each check, with known and unknown trust classes: many more
// than the cache has slots, so slots are shared and overwritten.
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

// TestRequirementsCacheAgreesWithTheDerivation: through the cache, every
// policy gets what deriving afresh gives, on a fill, on a hit and after
// its slot was taken by another policy.
func TestRequirementsCacheAgreesWithTheDerivation(t *testing.T) {
	f := newFixture(t, nil)
	pr := f.provider
	pols := requirementPolicies(3 * requirementsSlots)
	for round := 0; round < 3; round++ {
		for i, p := range pols {
			if got, want := unpacked(pr.requirementsOf(p)), pr.deriveRequirements(p); got != want {
				t.Fatalf("round %d, policy %d: cached %+v, derived %+v", round, i, got, want)
			}
		}
	}
	hits := 0
	for _, p := range pols[:9] {
		pr.requirementsOf(p)
		if _, ok := pr.requirements.slot(p).load(p); ok {
			hits++
		}
	}
	if hits == 0 {
		t.Fatal("nothing was cached")
	}
	if n := testing.AllocsPerRun(100, func() { pr.requirementsOf(pols[5]) }); n != 0 {
		t.Fatalf("the cache allocates %v objects", n)
	}
}

// TestRequirementsCacheUnderConcurrentFills races readers and writers on
// shared slots; every answer must be the derivation of the policy asked
// about (and -race must find nothing).
func TestRequirementsCacheUnderConcurrentFills(t *testing.T) {
	f := newFixture(t, nil)
	pr := f.provider
	pols := requirementPolicies(2 * requirementsSlots)
	want := make([]requirements, len(pols))
	for i, p := range pols {
		want[i] = pr.deriveRequirements(p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for n := 0; n < 20000; n++ {
				i := (n*7 + g*13) % len(pols)
				if got := unpacked(pr.requirementsOf(pols[i])); got != want[i] {
					errs <- fmt.Sprintf("policy %d: %+v, want %+v", i, got, want[i])
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
