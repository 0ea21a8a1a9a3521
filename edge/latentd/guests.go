package latentd

import (
	"context"
	"io"

	"latent.dev/admission/catalog"
	"latent.dev/admission/node/runner"
)

// Guests is what the node needs of its guest runtime: the runner backends
// that execute guests, and the artifacts they run. edge/guest provides the
// WebAssembly one (see WasmGuests); tests use a synthetic one.
type Guests interface {
	// Backends are the runner backends, by the backend name revision
	// policies give.
	Backends() map[string]runner.Backend
	// Prepare makes d's artifacts ready to run for its (tenant, service):
	// present, verified against their digests and compiled. It switches
	// nothing: the node commits the result under its admin lock together
	// with the catalog, and compiles outside it. The node calls it for
	// every stored deployment at startup and for every deploy, never at
	// admission. An error (naming the artifact) means one is missing,
	// corrupt or does not compile. When ctx ends first (the deploy's
	// client went away) the compile is abandoned where the runtime allows
	// and the error is ctx's.
	Prepare(ctx context.Context, d catalog.Deployment) (Prepared, error)
	// Undeploy drops what (tenant, service) runs; activations that hold a
	// release of it (see Hold) keep it until they end.
	Undeploy(tenant, service string)
	// Hold keeps release (a catalog.ReleaseID) of (tenant, service)
	// runnable until done is called (exactly once), however the pair is
	// redeployed or undeployed meanwhile, so that an activation runs the
	// release it was admitted for even when it waits for a cell across a
	// redeploy. ok is false, and nothing is held, when the pair does not
	// run that release now.
	Hold(tenant, service, release string) (done func(), ok bool)
	// PutArtifact stores the artifact whose SHA-256 is hexDigest (64
	// lowercase hex digits) from content, verifying it as it is read and
	// reading no more than the runtime's size limit plus one byte; content
	// that does not match, or is too large, is an error and stores
	// nothing.
	PutArtifact(hexDigest string, content io.Reader) error
	// Close releases what the runtime holds once no guest runs.
	Close(ctx context.Context) error
}

// Prepared is a deployment that Guests.Prepare made ready: compiled, not
// yet run. It is used by one goroutine at a time.
type Prepared interface {
	// Commit makes the prepared deployment its pair's, replacing what the
	// pair ran, and returns what it replaced, prepared in turn: Commit
	// that to restore the pair, or Discard it. After an error nothing
	// changed and the receiver is still to be discarded.
	Commit() (Prepared, error)
	// Discard drops what Prepare made ready; it does nothing after Commit
	// succeeded or after an earlier Discard.
	Discard()
}
