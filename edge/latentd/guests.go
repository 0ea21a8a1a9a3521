package latentd

import (
	"context"

	"latent.dev/admission/node/runner"
)

// Guests is what the node needs of its guest runtime: the runner backends
// that execute guests, and the artifact store they run from. edge/guest
// provides the WebAssembly one; tests use a synthetic one.
type Guests interface {
	// Backends are the runner backends, by the backend name revision
	// policies give.
	Backends() map[string]runner.Backend
	// Prepare makes the artifact named by digest ("sha256:<hex>") ready to
	// run: present, verified against its digest and compiled. The node
	// calls it for every deployed revision at startup and before it
	// accepts a deploy, never at admission. An error means the artifact
	// is missing, corrupt or does not compile.
	Prepare(ctx context.Context, digest string) error
	// PutArtifact stores content as the artifact whose SHA-256 is
	// hexDigest (64 lowercase hex digits), after verifying it; content
	// that does not match is an error and stores nothing.
	PutArtifact(hexDigest string, content []byte) error
	// Close releases what the runtime holds (compiled modules, caches)
	// once no guest runs.
	Close(ctx context.Context) error
}
