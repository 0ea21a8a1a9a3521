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
	// Deploy makes d's artifacts ready to run for its (tenant, service):
	// present, verified against their digests and compiled, replacing
	// what the pair had. The node calls it for every stored deployment at
	// startup and before the catalog accepts a deploy, never at
	// admission. An error (naming the artifact) means one is missing,
	// corrupt or does not compile, and changes nothing.
	Deploy(ctx context.Context, d catalog.Deployment) error
	// Undeploy drops what Deploy prepared for (tenant, service).
	Undeploy(tenant, service string)
	// PutArtifact stores the artifact whose SHA-256 is hexDigest (64
	// lowercase hex digits) from content, verifying it as it is read and
	// reading no more than the runtime's size limit plus one byte; content
	// that does not match, or is too large, is an error and stores
	// nothing.
	PutArtifact(hexDigest string, content io.Reader) error
	// Close releases what the runtime holds once no guest runs.
	Close(ctx context.Context) error
}
