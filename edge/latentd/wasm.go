package latentd

import (
	"context"
	"fmt"
	"io"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/runner"
)

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

// WasmGuests are Guests on edge/guest: its artifact store and its wazero
// backend.
type WasmGuests struct {
	store   *guest.Store
	backend *guest.Backend
}

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
	return &WasmGuests{store: store, backend: backend}, nil
}

// Backends is the wazero backend under WasmBackend.
func (g *WasmGuests) Backends() map[string]runner.Backend {
	return map[string]runner.Backend{WasmBackend: g.backend}
}

// Prepare compiles d's artifacts (guest.Backend.Prepare).
func (g *WasmGuests) Prepare(ctx context.Context, d catalog.Deployment) (Prepared, error) {
	p, err := g.backend.Prepare(ctx, d)
	if err != nil {
		return nil, err
	}
	return wasmPrepared{p}, nil
}

// Undeploy drops d's modules.
func (g *WasmGuests) Undeploy(tenant, service string) { g.backend.Undeploy(tenant, service) }

// Hold keeps a release runnable (guest.Backend.Hold).
func (g *WasmGuests) Hold(tenant, service, release string) (func(), bool) {
	return g.backend.Hold(tenant, service, release)
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

// Close closes the runtime and its compiled modules.
func (g *WasmGuests) Close(ctx context.Context) error { return g.backend.Close(ctx) }
