package catalog

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"latent.dev/admission/policy"
)

func TestRevisionPolicyRejectsEveryTupleFieldMismatch(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	other := weighted("acme", "thumbs", 1)
	other.Routes = append(other.Routes, Route{Name: "crop", Contract: "img.v2", Function: "crop", Revisions: other.Routes[0].Revisions})
	mustDeploy(t, c, other) // a second route with another contract and function
	pin := c.Pin()
	good := mustResolve(t, pin, Target{"acme", "thumbs", "resize"}, "k")
	if _, ok := pin.RevisionPolicy(good); !ok {
		t.Fatal("the unmodified tuple is rejected")
	}
	tests := []struct {
		name   string
		tamper func(r *policy.ResolvedRevision)
	}{
		{"tenant differs", func(r *policy.ResolvedRevision) { r.Tenant = "globex" }},
		{"service differs", func(r *policy.ResolvedRevision) { r.Service = "render" }},
		{"route differs (an existing route)", func(r *policy.ResolvedRevision) { r.Route = "crop" }},
		{"route differs (no such route)", func(r *policy.ResolvedRevision) { r.Route = "rotate" }},
		{"contract differs", func(r *policy.ResolvedRevision) { r.Contract = "img.v2" }},
		{"function differs", func(r *policy.ResolvedRevision) { r.Function = "crop" }},
		{"revision differs", func(r *policy.ResolvedRevision) { r.Revision = flipLast(r.Revision) }},
		{"revision differs (a revision of the other route)", func(r *policy.ResolvedRevision) {
			r.Revision = mustResolve(t, pin, Target{"acme", "thumbs", "crop"}, "k").Revision
		}},
		{"release differs", func(r *policy.ResolvedRevision) {
			r.Release = ReleaseID(Release{ArtifactDigest: "sha256:0a", Version: "9"})
		}},
		{"generation is older", func(r *policy.ResolvedRevision) { r.Generation-- }},
		{"generation is newer", func(r *policy.ResolvedRevision) { r.Generation++ }},
		{"tenant differs only in case", func(r *policy.ResolvedRevision) { r.Tenant = "Acme" }},
		{"empty tuple", func(r *policy.ResolvedRevision) { *r = policy.ResolvedRevision{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev := *good
			tt.tamper(&rev)
			if p, ok := pin.RevisionPolicy(&rev); ok || p != nil {
				t.Fatalf("tampered tuple %+v accepted", rev)
			}
			if id, p, slot, ok := pin.RevisionRecord(nil, &rev); ok || id != nil || p != nil || slot != nil {
				t.Fatalf("tampered tuple %+v has a record", rev)
			}
		})
	}
	t.Run("RevisionRecord answers the same policy and the pin's own identity", func(t *testing.T) {
		for _, target := range []Target{{"acme", "thumbs", "resize"}, {"acme", "thumbs", "crop"}} {
			rev := mustResolve(t, pin, target, "k")
			want, _ := pin.RevisionPolicy(rev)
			id, p, slot, ok := pin.RevisionRecord(nil, rev)
			if !ok || p != want || id == nil || *id != rev.RevisionIdentity || slot == nil {
				t.Fatalf("%v: RevisionRecord = %+v %p %p %v, want the resolved identity and %p", target, id, p, slot, ok, want)
			}
			again := *rev
			if id2, _, slot2, _ := pin.RevisionRecord(nil, &again); id2 != id || slot2 != slot {
				t.Fatal("the record is not the pin's shared one")
			}
		}
		var none *Pin
		if id, p, slot, ok := none.RevisionRecord(nil, good); ok || p != nil || id != nil || slot != nil {
			t.Fatal("nil pin verified")
		}
	})
	t.Run("attributes are ignored", func(t *testing.T) {
		rev := *good
		rev.Attributes = map[string]string{"trust_class": "privileged"}
		p, ok := pin.RevisionPolicy(&rev)
		if !ok || p.TrustClass != "standard" {
			t.Fatalf("attributes changed the answer: %v %v", p, ok)
		}
	})
	t.Run("nil pin and nil revision are rejected", func(t *testing.T) {
		var none *Pin
		if _, ok := none.RevisionPolicy(good); ok {
			t.Fatal("nil pin accepted")
		}
		if _, ok := pin.RevisionPolicy(nil); ok {
			t.Fatal("nil revision accepted")
		}
	})
}

// flipLast changes the last character of an identity, keeping its form.
func flipLast(id string) string {
	if id[len(id)-1] == '0' {
		return id[:len(id)-1] + "1"
	}
	return id[:len(id)-1] + "0"
}

func TestHeldPinKeepsServingAfterReplacement(t *testing.T) {
	c := New(GenerousCapacity)
	g1 := mustDeploy(t, c, weighted("acme", "thumbs", 1))
	mustDeploy(t, c, weighted("globex", "render", 1))
	old := c.Pin()
	oldRev := mustResolve(t, old, Target{"acme", "thumbs", "resize"}, "k")
	untouched := mustResolve(t, old, Target{"globex", "render", "resize"}, "k")
	oldPolicy, _ := old.RevisionPolicy(oldRev)

	replacement := weighted("acme", "thumbs", 1)
	replacement.Routes[0].Revisions[0].Policy.CallDepthLimit = 9
	g3 := mustDeploy(t, c, replacement)
	if oldRev.Generation != g1 || g3 != 3 {
		t.Fatalf("generations: deployed at %d, replaced at %d", oldRev.Generation, g3)
	}
	newer := c.Pin()

	if p, ok := old.RevisionPolicy(oldRev); !ok || p != oldPolicy || p.CallDepthLimit != 4 {
		t.Fatalf("held pin changed its answer: %v %v", p, ok)
	}
	if _, ok := newer.RevisionPolicy(oldRev); ok {
		t.Fatal("a newer pin accepts a revision of the replaced generation")
	}
	if _, ok := newer.RevisionPolicy(untouched); !ok {
		t.Fatal("a newer pin rejects a revision of an untouched deployment")
	}
	newRev := mustResolve(t, newer, Target{"acme", "thumbs", "resize"}, "k")
	if newRev.Generation != g3 || newRev.Revision == oldRev.Revision {
		t.Fatalf("replacement resolves to %+v", newRev)
	}
	if p, ok := newer.RevisionPolicy(newRev); !ok || p.CallDepthLimit != 9 {
		t.Fatalf("newer pin serves %v %v", p, ok)
	}
	if _, ok := old.RevisionPolicy(newRev); ok {
		t.Fatal("an older pin accepts a revision deployed after it was taken")
	}
	if old.Generation() != 2 || newer.Generation() != 3 {
		t.Fatalf("pin generations %d, %d", old.Generation(), newer.Generation())
	}
}

func TestHeldPinKeepsServingAfterDeletion(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	old := c.Pin()
	rev := mustResolve(t, old, Target{"acme", "thumbs", "resize"}, "k")
	g, err := c.Delete("acme", "thumbs")
	if err != nil || g != 2 {
		t.Fatalf("Delete = %d, %v", g, err)
	}
	if _, ok := old.RevisionPolicy(rev); !ok {
		t.Fatal("held pin forgot a deleted deployment")
	}
	if _, ok := c.Pin().RevisionPolicy(rev); ok {
		t.Fatal("a newer pin accepts a deleted deployment")
	}
	if _, _, err := c.Pin().Resolve(Target{"acme", "thumbs", "resize"}, "k"); !errors.Is(err, ErrNotResolved) {
		t.Fatalf("deleted target resolves: %v", err)
	}
	// Deploying the same content again is a new generation: the old
	// resolution stays rejected.
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	again := mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, "k")
	if again.Revision != rev.Revision || again.Generation == rev.Generation {
		t.Fatalf("redeploy: %+v vs %+v", again, rev)
	}
	if _, ok := c.Pin().RevisionPolicy(rev); ok {
		t.Fatal("a redeployed pair accepts the generation before its deletion")
	}
}

func TestDeleteOfMissingDeploymentConsumesNoGeneration(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	before := c.Pin()
	if _, err := c.Delete("acme", "other"); !errors.Is(err, ErrNotDeployed) {
		t.Fatalf("Delete of a missing deployment: %v", err)
	}
	if c.Pin() != before {
		t.Fatal("a failed delete published a pin")
	}
	if g := mustDeploy(t, c, weighted("acme", "other", 1)); g != 2 {
		t.Fatalf("next generation %d, want 2", g)
	}
}

func TestInvalidDeploymentChangesNothing(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	before := c.Pin()
	bad := weighted("acme", "thumbs", 1)
	bad.Routes[0].Revisions[0].Policy.Threading = 0
	bad.Routes = append(bad.Routes, bad.Routes[0])
	_, err := c.Deploy(bad)
	if !errors.Is(err, ErrInvalidDeployment) {
		t.Fatalf("Deploy(bad) = %v", err)
	}
	want := "catalog: invalid deployment: routes[0].revisions[0].policy.threading: must be single or multi\n" +
		"routes[1].route: duplicates routes[0]\n" +
		"routes[1].revisions[0].policy.threading: must be single or multi"
	if err.Error() != want {
		t.Fatalf("error text:\n%s\nwant:\n%s", err, want)
	}
	if c.Pin() != before || mustDeploy(t, c, weighted("x", "y", 1)) != 2 {
		t.Fatal("an invalid deployment changed the catalog")
	}
}

func TestDeployCopiesItsInput(t *testing.T) {
	c := New(GenerousCapacity)
	d := weighted("acme", "thumbs", 1)
	mustDeploy(t, c, d)
	rev := mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, "k")
	d.Routes[0].Revisions[0].Policy.Features[0] = "threads"
	d.Routes[0].Name = "changed"
	p, ok := c.Pin().RevisionPolicy(rev)
	if !ok || p.Features[0] != "simd" {
		t.Fatalf("caller's later edit reached the catalog: %v %v", p, ok)
	}
	got, _, _ := c.Pin().Deployment("acme", "thumbs")
	got.Routes[0].Revisions[0].Policy.Features[0] = "gpu"
	if p, _ := c.Pin().RevisionPolicy(rev); p.Features[0] != "simd" {
		t.Fatal("a returned copy shares memory with the catalog")
	}
}

func TestPinIsTakenWithoutCopying(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	first, second := c.Pin(), c.Pin()
	if first != second {
		t.Fatal("two pins of one generation are different values")
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.Pin() }); n != 0 {
		t.Fatalf("Pin allocates %v times", n)
	}
	before := c.Pin()
	mustDeploy(t, c, weighted("globex", "render", 1))
	if before.lookup("acme", "thumbs") != c.Pin().lookup("acme", "thumbs") {
		t.Fatal("an untouched deployment was copied, not shared")
	}
}

func TestConcurrentReadersSeeConsistentPins(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1, 1))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				pin := c.Pin()
				rev, _, err := pin.Resolve(Target{"acme", "thumbs", "resize"}, "key")
				if err != nil {
					continue // deleted in this generation
				}
				if _, ok := pin.RevisionPolicy(rev); !ok {
					t.Error("a pin rejects its own resolution")
					return
				}
			}
		})
	}
	for i := range 200 {
		if i%10 == 9 {
			if _, err := c.Delete("acme", "thumbs"); err != nil {
				t.Error(err)
			}
			continue
		}
		mustDeploy(t, c, weighted("acme", "thumbs", uint64(i%3), 1))
	}
	close(stop)
	wg.Wait()
}

func TestGenerationCounterNeverWraps(t *testing.T) {
	c := New(GenerousCapacity)
	c.issued = math.MaxUint64 - 1
	if g := mustDeploy(t, c, weighted("acme", "thumbs", 1)); g != math.MaxUint64 {
		t.Fatalf("last generation %d", g)
	}
	last := c.Pin()
	if _, err := c.Deploy(weighted("globex", "render", 1)); !errors.Is(err, ErrGenerationExhausted) {
		t.Fatalf("Deploy past the last generation = %v", err)
	}
	if _, err := c.Delete("acme", "thumbs"); !errors.Is(err, ErrGenerationExhausted) {
		t.Fatalf("Delete past the last generation = %v", err)
	}
	if c.Pin() != last {
		t.Fatal("an exhausted catalog changed")
	}
}

// TestRoutesAreFoundAtEveryCount: a deployment compares route names up to
// linearRoutes routes and keeps a map beyond; resolution and verification
// must find every route and no other either way.
func TestRoutesAreFoundAtEveryCount(t *testing.T) {
	for _, n := range []int{1, linearRoutes, linearRoutes + 1, 3 * linearRoutes} {
		c := New(GenerousCapacity)
		d := weighted("acme", "thumbs", 1)
		base := d.Routes[0]
		d.Routes = nil
		for i := 0; i < n; i++ {
			rt := base
			rt.Name = fmt.Sprintf("route-%d", i)
			d.Routes = append(d.Routes, rt)
		}
		mustDeploy(t, c, d)
		pin := c.Pin()
		for i := 0; i < n; i++ {
			rev := mustResolve(t, pin, Target{"acme", "thumbs", fmt.Sprintf("route-%d", i)}, "k")
			if rev.Route != fmt.Sprintf("route-%d", i) {
				t.Fatalf("%d routes: resolved %q for route-%d", n, rev.Route, i)
			}
			if _, ok := pin.RevisionPolicy(rev); !ok {
				t.Fatalf("%d routes: route-%d does not verify", n, i)
			}
			forged := *rev
			forged.Route = fmt.Sprintf("route-%d", n)
			if _, ok := pin.RevisionPolicy(&forged); ok {
				t.Fatalf("%d routes: a route past the last verifies", n)
			}
		}
		if _, _, err := pin.Resolve(Target{"acme", "thumbs", "route-x"}, "k"); !errors.Is(err, ErrNotResolved) {
			t.Fatalf("%d routes: an unknown route resolved: %v", n, err)
		}
	}
}

// TestOwnRecord: a pin recognises the handles its own Resolve made, and
// answers for them the record RevisionRecord finds; it recognises no
// other: none of another pin of the same catalog, of another catalog, a
// nil one or a value of another type.
func TestOwnRecord(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	pin := c.Pin()
	rev, handle, err := pin.Resolve(Target{"acme", "thumbs", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	if handle.RevisionIdentity() != rev.RevisionIdentity {
		t.Fatalf("the handle's identity %+v is not the resolved one", handle.RevisionIdentity())
	}
	id, p, slot, ok := pin.OwnRecord(handle)
	wantID, wantP, wantSlot, _ := pin.RevisionRecord(nil, rev)
	if !ok || id != wantID || p != wantP || slot != wantSlot {
		t.Fatal("the pin's own handle does not answer its record")
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _, _ = pin.OwnRecord(handle) }); n != 0 {
		t.Fatalf("OwnRecord allocates %v objects", n)
	}
	mustDeploy(t, c, weighted("globex", "thumbs", 1)) // acme's deployment is unchanged
	newer := c.Pin()
	other := New(GenerousCapacity)
	mustDeploy(t, other, weighted("acme", "thumbs", 1))
	_, foreign, err := other.Pin().Resolve(Target{"acme", "thumbs", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	var none *Pin
	for name, tc := range map[string]struct {
		pin    *Pin
		handle any
	}{
		"a newer pin of the same catalog": {newer, handle},
		"another catalog's handle":        {pin, foreign},
		"a nil handle":                    {pin, (*Handle)(nil)},
		"a zero handle":                   {pin, &Handle{}},
		"no handle":                       {pin, nil},
		"a value of another type":         {pin, rev},
		"a nil pin":                       {none, handle},
	} {
		if id, p, slot, ok := tc.pin.OwnRecord(tc.handle); ok || id != nil || p != nil || slot != nil {
			t.Errorf("%s: recognised", name)
		}
	}
	if (*Handle)(nil).RevisionIdentity() != (policy.RevisionIdentity{}) || (&Handle{}).RevisionIdentity() != (policy.RevisionIdentity{}) {
		t.Error("a nil or zero handle names an identity")
	}
}
