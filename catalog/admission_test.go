package catalog_test

import (
	"os"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// TestAdmissionWorksWithTheStoreRemoved opens a store, deletes its
// directory, and admits, starts and releases through the reopened pin: an
// admission-time lookup never touches a file, and allocates nothing beyond
// the permit.
func TestAdmissionWorksWithTheStoreRemoved(t *testing.T) {
	dir := t.TempDir()
	c, err := catalog.Create(dir, catalog.Capacity{MaxRevisions: 10, MaxPolicyBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Deploy(thumbs(4)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := catalog.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	nodePolicy, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := core.NewLocalQuotaProvider(nodePolicy)
	if err != nil {
		t.Fatal(err)
	}
	load := core.NewNodeLoadState(time.Minute, nil)
	now := time.UnixMilli(1767225600000)
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: now, CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	pin := reopened.Pin()
	rev, handle, err := pin.Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	ctl := provider.Controller(core.ControllerConfig{Source: pin, Load: load, Clock: stoppedClock{now}})
	req := &core.AdmissionRequest{
		ActivationID: "a", Principal: core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision: *rev, Handle: handle, RequestedBudget: policy.Budget{CPUFuel: 1000, MemoryBytes: 1 << 20}, PayloadBytes: 10, Priority: 1,
	}
	allocs := testing.AllocsPerRun(100, func() {
		p, err := ctl.Admit(req)
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.StartExecution()
		if err != nil {
			t.Fatal(err)
		}
		e.Release()
	})
	if allocs > 1 {
		t.Fatalf("a cycle through the reopened pin allocates %v objects; only the permit is expected", allocs)
	}
	if s := provider.NodeSnapshot(); s.Live != 0 {
		t.Fatalf("not released: %+v", s)
	}
}

// stoppedClock reads the same time forever.
type stoppedClock struct{ now time.Time }

func (c stoppedClock) Now() time.Time                  { return c.now }
func (c stoppedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }
