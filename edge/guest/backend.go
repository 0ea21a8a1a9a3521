package guest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"latent.dev/admission/catalog"
	"latent.dev/admission/node/runner"
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

// Run implements runner.Backend: it instantiates the module that g's
// revision's release names in g's deployment, with g.Input as standard
// input, calls _start under the grant's memory, the context's deadline
// and the fuel clock, and closes the instance before returning.
func (b *Backend) Run(ctx context.Context, g *runner.Guest) runner.Exit {
	if g == nil {
		return runner.Exit{Kind: runner.ExitPlatformFailure}
	}
	m := b.acquire(catalog.DeploymentKey{Tenant: g.Revision.Tenant, Service: g.Revision.Service}, g.Revision.Release)
	if m == nil {
		return runner.Exit{Kind: runner.ExitPlatformFailure}
	}
	defer b.release(m)
	exit, clean := b.execute(ctx, m, g)
	// A cell is clean once its guest's instance closed without error.
	// Every instance is fresh, so nothing of a guest survives it in the
	// cell.
	exit.CellUncertain = !clean
	return exit
}

// execute runs one instance of m to its end, metered against g.Budget:
// the exit carries the fuel the clock burned and the memory's peak, and
// which of them refused a charge. clean is false when the instance could
// not be closed cleanly.
func (b *Backend) execute(ctx context.Context, m *module, g *runner.Guest) (exit runner.Exit, clean bool) {
	interrupted := runner.Exit{Kind: runner.ExitInterrupted}
	if m.minMemory > g.Budget.MemoryBytes {
		// The module's initial memory alone is over the grant.
		return runner.Exit{Kind: runner.ExitInterrupted, MemoryExhausted: true}, true
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rs := b.takeRun()
	rs.begin(runCtx, cancel, g, b.maxOutput, &b.memories, m.minMemory)
	defer func() {
		// The clock has stopped and the instance is closed (or its close
		// failed): what they metered is final.
		exit.Fuel, exit.FuelExhausted = rs.fuel.burned, rs.fuel.exhausted
		exit.PeakMemory, exit.MemoryExhausted = rs.memory.peak, rs.memory.refused
		// Only a run state whose instance closed cleanly is used again:
		// nothing of that instance can reach it any more.
		if clean && !b.closing.Load() {
			rs.end()
			b.runs.Put(rs)
		}
	}()
	// Instantiating is part of the activation: its time burns the fuel,
	// and wazero, which does not interrupt an instantiation, is not asked
	// to run _start once the run's context has ended (the module limits
	// keep an instantiation to milliseconds: see InstanceCeilingBytes).
	rs.fuel.begin(g.Budget.CPUFuel, b.fuelRate, cancel)
	inst, err := b.runtime.InstantiateModule(experimental.WithMemoryAllocator(runCtx, &rs.memory), m.compiled, rs.config)
	if err == nil && runCtx.Err() != nil {
		rs.fuel.stop()
		return interrupted, inst.Close(context.WithoutCancel(ctx)) == nil
	}
	if err != nil {
		rs.fuel.stop()
		switch {
		case rs.memory.refused || runCtx.Err() != nil:
			return interrupted, true
		case b.closing.Load():
			return runner.Exit{Kind: runner.ExitPlatformFailure}, true
		}
		// Imports were resolved at deploy and a start section refused, so
		// what fails here is the module's own initialization (a data or
		// element segment out of bounds): the guest's fault.
		return runner.Exit{Kind: runner.ExitTrapped}, true
	}
	_, err = inst.ExportedFunction("_start").Call(runCtx)
	rs.fuel.stop()
	// Closing frees the memory.
	clean = inst.Close(context.WithoutCancel(ctx)) == nil
	if b.closing.Load() {
		// The backend's Close may have ended the guest; what it said
		// cannot be trusted.
		return runner.Exit{Kind: runner.ExitPlatformFailure}, clean
	}
	return b.exit(runCtx, err, &rs.memory, &rs.out), clean
}

// exit turns how _start ended into the runner's exit kind.
func (b *Backend) exit(runCtx context.Context, err error, memory *meteredMemory, out *boundedOutput) runner.Exit {
	exitErr, isExit := err.(*sys.ExitError) // as wazero returns it
	if !isExit && err != nil {
		isExit = errors.As(err, &exitErr)
	}
	switch {
	case err == nil || (isExit && exitErr.ExitCode() == 0):
		if out.overflow {
			return runner.Exit{Kind: runner.ExitTrapped}
		}
		return runner.Exit{Kind: runner.ExitReturned, Output: out.buffer}
	case out.overflow:
		return runner.Exit{Kind: runner.ExitTrapped}
	case runCtx.Err() != nil && isExit && closedByContext(exitErr.ExitCode()):
		// Deadline, cancellation or fuel: the runner tells them apart
		// from the refused charges and the clock.
		return runner.Exit{Kind: runner.ExitInterrupted}
	case memory.refused:
		// The guest died of a refused memory growth, whether it trapped or
		// exited (Go's runtime exits 2 when out of memory).
		return runner.Exit{Kind: runner.ExitInterrupted}
	case isExit:
		return runner.Exit{Kind: runner.ExitDeclaredError, Output: out.buffer}
	}
	return runner.Exit{Kind: runner.ExitTrapped}
}

func closedByContext(code uint32) bool {
	return code == sys.ExitCodeContextCanceled || code == sys.ExitCodeDeadlineExceeded
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
