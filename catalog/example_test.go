package catalog_test

import (
	"errors"
	"fmt"
	"os"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// The pin is what admission asks for revision policy.
var _ core.RevisionPolicySource = (*catalog.Pin)(nil)

func thumbs(callDepth uint32) catalog.Deployment {
	return catalog.Deployment{
		Tenant: "acme", Service: "thumbs",
		Routes: []catalog.Route{{
			Name: "resize", Contract: "img.v1", Function: "resize",
			Revisions: []catalog.Revision{{
				Release: catalog.Release{ArtifactDigest: "sha256:3f6c", Version: "1.4.2"},
				Weight:  100,
				Policy: policy.RevisionPolicy{
					TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded,
					StateModel: "stateless", CallDepthLimit: callDepth,
				},
			}},
		}},
	}
}

// An adapter resolves a target through a pin and hands the resolved
// revision to admission, which checks it against the same pin (or a newer
// one) and never resolves again.
func Example() {
	dir, err := os.MkdirTemp("", "catalog-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	c, err := catalog.Create(dir, catalog.Capacity{MaxRevisions: 100, MaxPolicyBytes: 1 << 20})
	if err != nil {
		panic(err)
	}
	if _, err := c.Deploy(thumbs(4)); err != nil {
		panic(err)
	}
	pin := c.Pin() // admission's policy source, e.g. controller.WithPolicySource(pin)

	rev, _, err := pin.Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, "user-42")
	if err != nil {
		panic(err)
	}
	p, ok := pin.RevisionPolicy(rev)
	fmt.Println("generation", rev.Generation, "call depth", p.CallDepthLimit, ok)

	// A replacement is a new generation; the held pin keeps its answer.
	if _, err := c.Deploy(thumbs(8)); err != nil {
		panic(err)
	}
	_, stillOK := pin.RevisionPolicy(rev)
	_, newerOK := c.Pin().RevisionPolicy(rev)
	fmt.Println("held pin:", stillOK, "newer pin:", newerOK)

	// After a restart the catalog is the same, generation counter included.
	// An open store holds its directory's lock: close it before reopening.
	if err := c.Close(); err != nil {
		panic(err)
	}
	reopened, err := catalog.Open(dir)
	if err != nil {
		panic(err)
	}
	defer reopened.Close()
	fmt.Println("reopened at generation", reopened.Generation())

	_, _, err = reopened.Pin().Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: "crop"}, "user-42")
	fmt.Println(errors.Is(err, catalog.ErrNotResolved))
	// Output:
	// generation 1 call depth 4 true
	// held pin: true newer pin: false
	// reopened at generation 2
	// true
}
