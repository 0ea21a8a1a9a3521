package guest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"latent.dev/admission/catalog"
)

// DefaultMaxModules is the compiled-module cache's capacity when Config
// names none.
const DefaultMaxModules = 64

// DefaultMaxMemoryBytes is the runtime's memory ceiling when Config names
// none: 4 GiB, the most a 32-bit WebAssembly memory can address.
const DefaultMaxMemoryBytes = 1 << 32

// Config configures a Backend.
type Config struct {
	// Artifacts is where deployed modules are loaded from; required.
	Artifacts *Store
	// MaxResponseBytes bounds a guest's standard output (the response
	// body); required, positive. Output beyond it makes the guest trap.
	MaxResponseBytes int64
	// FuelPerMillisecond is the rate at which execution time burns CPU
	// fuel; zero means DefaultFuelPerMillisecond (one unit per
	// nanosecond).
	FuelPerMillisecond uint64
	// MaxMemoryBytes is the node's ceiling on any guest's linear memory,
	// rounded down to whole 64 KiB pages: a module whose initial memory
	// is larger does not compile. Each guest is held to its own grant
	// below it. Zero means DefaultMaxMemoryBytes.
	MaxMemoryBytes uint64
	// MaxModules bounds the compiled modules kept at once (distinct
	// digests referenced by deployments, see Deploy); zero means
	// DefaultMaxModules.
	MaxModules int
}

// Backend is a node/runner Backend that runs WASI command modules on
// wazero. Deploy and Undeploy name the modules each (tenant, service)
// may run, compiling each digest once; Run instantiates a fresh instance
// per activation and closes it before returning. It is safe for
// concurrent use.
//
// Its one lock is mu: the fields after it are guarded by it, and
// releaseLocked is called with it held. The fields before it never change
// after New, but closing, which is atomic; runs and memories are pools
// safe for concurrent use.
//
// A Backend must not be copied after first use.
type Backend struct {
	noCopy noCopy

	store      *Store
	maxOutput  int64
	fuelRate   uint64
	maxModules int
	runtime    wazero.Runtime
	// closing is set before the runtime closes, so that a guest the close
	// ends (its instance reports exit code 0) is not taken for a success.
	closing atomic.Bool
	// wasi is what the runtime's WASI module exports, by name.
	wasi map[string]api.FunctionDefinition

	mu sync.Mutex
	// modules holds every compiled module, each with its reference count:
	// one per deployed release that names it, one per running guest. A
	// module whose count reaches zero is closed and dropped. Guarded by mu.
	modules map[Digest]*cachedModule
	// deployments maps each deployed pair to its release IDs' modules.
	// Guarded by mu.
	deployments map[catalog.DeploymentKey]map[string]*module
	// held keeps releases that admitted activations hold (see Hold) after
	// their deployment replaced or dropped them; nil until the first
	// hold. Guarded by mu.
	held   map[holdKey]*heldRelease
	closed bool // guarded by mu

	// runs keeps the run states of instances that closed cleanly, for
	// the next activations (run.go); memories keeps their linear
	// memories' arrays, cleared (run.go, memoryPool).
	runs     sync.Pool
	memories memoryPool
}

// cachedModule is a compiled module in Backend.modules with its
// references; refs is guarded by Backend.mu.
type cachedModule struct {
	module *module
	refs   int
}

// New builds a backend: one wazero runtime (compiler where the platform
// has one, else the interpreter) that closes an instance when its
// context ends, with the memory ceiling, and WASI instantiated in it.
// Close releases it.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Artifacts == nil {
		return nil, errors.New("guest: Config.Artifacts is required")
	}
	if cfg.MaxResponseBytes <= 0 {
		return nil, errors.New("guest: Config.MaxResponseBytes must be positive")
	}
	if cfg.FuelPerMillisecond == 0 {
		cfg.FuelPerMillisecond = DefaultFuelPerMillisecond
	}
	if cfg.MaxMemoryBytes == 0 {
		cfg.MaxMemoryBytes = DefaultMaxMemoryBytes
	}
	if cfg.MaxModules <= 0 {
		cfg.MaxModules = DefaultMaxModules
	}
	pages := min(cfg.MaxMemoryBytes/pageBytes, 1<<16)
	if pages == 0 {
		return nil, errors.New("guest: Config.MaxMemoryBytes is below one page")
	}
	// The module scanner (scan.go) reads exactly the 2.0 instruction set:
	// a feature enabled here must be taught to it first.
	rc := wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2).
		WithCloseOnContextDone(true).WithMemoryLimitPages(uint32(pages))
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r); err != nil {
		_ = r.Close(ctx)
		return nil, err
	}
	wasi := r.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	return &Backend{
		store:       cfg.Artifacts,
		maxOutput:   cfg.MaxResponseBytes,
		fuelRate:    cfg.FuelPerMillisecond,
		maxModules:  cfg.MaxModules,
		runtime:     r,
		wasi:        wasi,
		modules:     map[Digest]*cachedModule{},
		deployments: map[catalog.DeploymentKey]map[string]*module{},
	}, nil
}

// Close closes the runtime and every compiled module. Call it after the
// pipeline has drained: a guest still running is closed with it and ends
// as a platform failure.
func (b *Backend) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.closing.Store(true)
	b.modules, b.deployments = map[Digest]*cachedModule{}, map[catalog.DeploymentKey]map[string]*module{}
	b.mu.Unlock()
	return b.runtime.Close(ctx)
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
