package catalog

import (
	"testing"

	"latent.dev/admission/policy"
)

// RevisionRecord answers alike whatever handle comes with the tuple: its
// own pin's handle of the same deployment (which it starts from), of
// another deployment, a handle of an older pin whose deployment has since
// been redeployed, a zero handle and none. A shortcut that trusted the
// handle's deployment without checking its pin and its (tenant, service)
// would verify the tuple against the wrong deployment.
func TestRevisionRecordAnswersAlikeWithAnyHandle(t *testing.T) {
	c := New(GenerousCapacity)
	d := weighted("acme", "thumbs", 1, 1)
	d.Routes = append(d.Routes, Route{Name: "crop", Contract: "img.v2", Function: "crop", Revisions: d.Routes[0].Revisions})
	mustDeploy(t, c, d)
	mustDeploy(t, c, weighted("globex", "thumbs", 1))
	mustDeploy(t, c, weighted("acme", "render", 1))
	old := c.Pin()
	_, oldHandle, err := old.Resolve(Target{"acme", "thumbs", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, d) // a new generation of acme/thumbs
	pin := c.Pin()
	resize, resizeHandle, err := pin.Resolve(Target{"acme", "thumbs", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	crop, cropHandle, err := pin.Resolve(Target{"acme", "thumbs", "crop"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	globex, globexHandle, err := pin.Resolve(Target{"globex", "thumbs", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	render, renderHandle, err := pin.Resolve(Target{"acme", "render", "resize"}, "k")
	if err != nil {
		t.Fatal(err)
	}
	handles := map[string]any{"acme/render's handle": renderHandle,
		"none": nil, "a zero handle": &Handle{}, "the resize handle": resizeHandle, "the crop handle": cropHandle,
		"globex's handle": globexHandle, "the older pin's handle": oldHandle, "another type": "acme",
	}
	tuples := map[string]*policy.ResolvedRevision{"resize": resize, "crop": crop, "globex": globex, "render": render}
	for _, name := range []string{"resize", "crop", "globex", "render"} {
		rev := tuples[name]
		wantID, wantP, wantSlot, ok := pin.RevisionRecord(nil, rev)
		if !ok {
			t.Fatalf("%s: the resolved tuple has no record", name)
		}
		forged := *rev
		forged.Revision = flipLast(forged.Revision)
		olderGen := *rev
		olderGen.Generation--
		for hname, h := range handles {
			id, p, slot, ok := pin.RevisionRecord(h, rev)
			if !ok || id != wantID || p != wantP || slot != wantSlot {
				t.Errorf("%s with %s: %v, want the record found without a handle", name, hname, ok)
			}
			if _, _, _, ok := pin.RevisionRecord(h, &forged); ok {
				t.Errorf("%s with %s: a forged revision ID verified", name, hname)
			}
			if _, _, _, ok := pin.RevisionRecord(h, &olderGen); ok {
				t.Errorf("%s with %s: the older generation verified", name, hname)
			}
		}
	}
	// The older pin's handle with the older pin's tuple: the newer pin
	// holds another generation and must refuse it.
	oldRev2, _, _ := old.Resolve(Target{"acme", "thumbs", "resize"}, "k")
	if _, _, _, ok := pin.RevisionRecord(oldHandle, oldRev2); ok {
		t.Error("the newer pin verified the older generation through the older pin's handle")
	}
	if _, _, _, ok := old.RevisionRecord(resizeHandle, oldRev2); !ok {
		t.Error("the older pin refused its own tuple given the newer pin's handle")
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _, _ = pin.RevisionRecord(cropHandle, resize) }); n != 0 {
		t.Fatalf("RevisionRecord allocates %v objects", n)
	}
}
