package latentd

import (
	"context"
	"fmt"
	"io"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
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

// WasmBackend is the backend name WebAssembly revisions give
// (policy "backend": "wasm").
const WasmBackend = "wasm"

// WasmConfig configures the WebAssembly guests.
type WasmConfig struct {
	// ArtifactsDir is the artifact store: ARTIFACTS/sha256/<hex>.wasm.
	ArtifactsDir string
	// MaxArtifactBytes bounds one artifact; zero is
	// guest.DefaultMaxArtifactBytes.
	MaxArtifactBytes int64
	// MaxResponseBytes bounds a guest's standard output; required.
	MaxResponseBytes int64
	// FuelPerMillisecond is the rate execution time burns CPU fuel; zero
	// is guest.DefaultFuelPerMillisecond.
	FuelPerMillisecond uint64
	// MaxMemoryBytes is the ceiling of any guest's linear memory; zero is
	// the node policy's memory ceiling, rounded by edge/guest.
	MaxMemoryBytes uint64
}

// WasmGuests are Guests on edge/guest: its wazero backend, whose Hold,
// Undeploy and Close are the Guests' own (promoted, so an invocation's
// hold calls the backend with no hop between), and its artifact store.
type WasmGuests struct {
	*wasmBackend
	store *guest.Store
}

// wasmBackend names the embedded backend so that the field stays
// unexported.
type wasmBackend = guest.Backend

// NewWasmGuests opens the artifact store and builds the backend.
func NewWasmGuests(ctx context.Context, cfg WasmConfig) (*WasmGuests, error) {
	store, err := guest.OpenStore(cfg.ArtifactsDir, cfg.MaxArtifactBytes)
	if err != nil {
		return nil, fmt.Errorf("latentd: artifacts: %w", err)
	}
	backend, err := guest.New(ctx, guest.Config{Artifacts: store, MaxResponseBytes: cfg.MaxResponseBytes,
		FuelPerMillisecond: cfg.FuelPerMillisecond, MaxMemoryBytes: cfg.MaxMemoryBytes})
	if err != nil {
		return nil, fmt.Errorf("latentd: guests: %w", err)
	}
	return &WasmGuests{wasmBackend: backend, store: store}, nil
}

// Backends is the wazero backend under WasmBackend.
func (g *WasmGuests) Backends() map[string]runner.Backend {
	return map[string]runner.Backend{WasmBackend: g.wasmBackend}
}

// Prepare compiles d's artifacts (guest.Backend.Prepare).
func (g *WasmGuests) Prepare(ctx context.Context, d catalog.Deployment) (Prepared, error) {
	p, err := g.wasmBackend.Prepare(ctx, d)
	if err != nil {
		return nil, err
	}
	return wasmPrepared{p}, nil
}

// wasmPrepared is a guest.Prepared as a Prepared.
type wasmPrepared struct{ p *guest.Prepared }

func (w wasmPrepared) Commit() (Prepared, error) {
	previous, err := w.p.Commit()
	if err != nil {
		return nil, err
	}
	return wasmPrepared{previous}, nil
}

func (w wasmPrepared) Discard() { w.p.Discard() }

// PutArtifact streams content into the store, verified against hexDigest.
func (g *WasmGuests) PutArtifact(hexDigest string, content io.Reader) error {
	d, err := guest.ParseDigest("sha256:" + hexDigest)
	if err != nil {
		return err
	}
	return g.store.Put(d, content)
}
