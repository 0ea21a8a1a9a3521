package catalog_test

import (
	"os"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// twoRoutes is thumbs with a second route, crop, whose revision has call
// depth callDepth+1, so a grant tells which revision was admitted.
func twoRoutes(callDepth uint32) catalog.Deployment {
	d := thumbs(callDepth)
	crop := d.Routes[0]
	crop.Name, crop.Contract, crop.Function = "crop", "img.v2", "crop"
	crop.Revisions = []catalog.Revision{crop.Revisions[0]}
	crop.Revisions[0].Policy.CallDepthLimit = callDepth + 1
	d.Routes = append(d.Routes, crop)
	return d
}

// outcome is what admission answered, in a comparable form.
type outcome struct {
	err         error
	revision    policy.RevisionIdentity
	budget      policy.Budget
	obligations string
}

// TestHandlesAreNotTakenOnTrust: a request carrying a handle gets exactly
// the answer its identity gets without one, whatever the handle: another
// catalog's, one whose request identity was edited after resolution, one
// from a pin whose deployment has since changed.
func TestHandlesAreNotTakenOnTrust(t *testing.T) {
	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	nodePolicy, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1767225600000)
	admit := func(t *testing.T, pin *catalog.Pin, rev policy.ResolvedRevision, handle core.RevisionHandle) outcome {
		t.Helper()
		provider, err := core.NewLocalQuotaProvider(nodePolicy)
		if err != nil {
			t.Fatal(err)
		}
		load := core.NewNodeLoadState(time.Minute, stoppedClock{now})
		if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: now, CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
			t.Fatal(err)
		}
		ctl := provider.Controller(core.ControllerConfig{Source: pin, Load: load, Clock: stoppedClock{now}})
		p, err := ctl.Admit(&core.AdmissionRequest{
			ActivationID: "a", Principal: core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
			Revision: rev, Handle: handle, RequestedBudget: policy.Budget{CPUFuel: 1000, MemoryBytes: 1 << 20}, PayloadBytes: 10, Priority: 1,
		})
		if err != nil {
			return outcome{err: err}
		}
		defer p.Release()
		g := p.Grant()
		o := g.Obligations
		return outcome{revision: g.Revision, budget: g.Budget,
			obligations: o.CellClass.String() + "/" + o.QueueClass + "/" + o.TrustClass + "/" + o.Backend + "/" + string(rune('0'+o.CallDepthLimit))}
	}
	resolve := func(t *testing.T, pin *catalog.Pin, route string) (policy.ResolvedRevision, *catalog.Handle) {
		t.Helper()
		rev, handle, err := pin.Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: route}, "k")
		if err != nil {
			t.Fatal(err)
		}
		return *rev, handle
	}
	deploy := func(t *testing.T, c *catalog.Catalog, d catalog.Deployment) {
		t.Helper()
		if _, err := c.Deploy(d); err != nil {
			t.Fatal(err)
		}
	}

	home := catalog.New(catalog.GenerousCapacity)
	deploy(t, home, twoRoutes(4))
	pin := home.Pin()
	resize, resizeHandle := resolve(t, pin, "resize")
	crop, _ := resolve(t, pin, "crop")

	twin := catalog.New(catalog.GenerousCapacity) // the same deployment at the same generation
	deploy(t, twin, twoRoutes(4))
	_, twinHandle := resolve(t, twin.Pin(), "resize")
	stranger := catalog.New(catalog.GenerousCapacity) // another revision of the same route
	deploy(t, stranger, twoRoutes(6))
	strangerRev, strangerHandle := resolve(t, stranger.Pin(), "resize")

	changing := catalog.New(catalog.GenerousCapacity)
	deploy(t, changing, twoRoutes(4))
	oldPin := changing.Pin()
	oldRev, oldHandle := resolve(t, oldPin, "resize")
	deploy(t, changing, twoRoutes(5)) // the deployment changes
	changedPin := changing.Pin()
	unchanging := catalog.New(catalog.GenerousCapacity)
	deploy(t, unchanging, twoRoutes(4))
	olderPin := unchanging.Pin()
	olderRev, olderHandle := resolve(t, olderPin, "resize")
	if _, err := unchanging.Deploy(catalog.Deployment{Tenant: "globex", Service: "render", Routes: thumbs(4).Routes}); err != nil {
		t.Fatal(err) // another deployment changes; acme's does not
	}

	edited := func(edit func(r *policy.ResolvedRevision)) policy.ResolvedRevision {
		r := resize
		edit(&r)
		return r
	}
	cases := []struct {
		name   string
		pin    *catalog.Pin
		rev    policy.ResolvedRevision
		handle core.RevisionHandle
		admits bool
	}{
		{"the pin's own handle", pin, resize, resizeHandle, true},
		{"another catalog's handle, the same identity", pin, resize, twinHandle, true},
		{"another catalog's handle and identity, of a revision this pin lacks", pin, strangerRev, strangerHandle, false},
		{"another catalog's handle beside this pin's identity", pin, resize, strangerHandle, true},
		{"an edited revision ID", pin, edited(func(r *policy.ResolvedRevision) { r.Revision = "rev-forged" }), resizeHandle, false},
		{"an edited generation", pin, edited(func(r *policy.ResolvedRevision) { r.Generation++ }), resizeHandle, false},
		{"an edited tenant", pin, edited(func(r *policy.ResolvedRevision) { r.Tenant = "globex" }), resizeHandle, false},
		{"an identity with a space", pin, edited(func(r *policy.ResolvedRevision) { r.Route = "re size" }), resizeHandle, false},
		{"the identity of another revision the pin holds", pin, crop, resizeHandle, true},
		{"a handle from a pin whose deployment has since changed", changedPin, oldRev, oldHandle, false},
		{"the same handle through its own, older pin", oldPin, oldRev, oldHandle, true},
		{"a handle from an older pin of an unchanged deployment", unchanging.Pin(), olderRev, olderHandle, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := admit(t, tc.pin, tc.rev, tc.handle)
			plain := admit(t, tc.pin, tc.rev, nil)
			if got != plain {
				t.Fatalf("with the handle %+v, with the identity alone %+v", got, plain)
			}
			if admitted := got.err == nil; admitted != tc.admits {
				t.Fatalf("admitted %v (%v), want %v", admitted, got.err, tc.admits)
			}
			if got.err == nil && got.revision != tc.rev.RevisionIdentity {
				t.Fatalf("granted %+v for %+v", got.revision, tc.rev.RevisionIdentity)
			}
		})
	}
	if olderPin == unchanging.Pin() {
		t.Fatal("the unchanged deployment's pin was not replaced")
	}
}
