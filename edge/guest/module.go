package guest

import (
	"context"
	"runtime"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// module is one compiled artifact, shared by every deployment that names
// its digest and by the guests running it. It is immutable; its
// reference count lives in the Backend, guarded by Backend.mu.
type module struct {
	digest   Digest
	compiled wazero.CompiledModule
	// minMemory is the bytes of linear memory an instance starts with,
	// charged against the grant before instantiation.
	minMemory uint64
}

// compile scans binary against the module limits (scan.go), then
// decodes, validates and compiles it, and checks it is a WASI command
// this runtime can instantiate. It is the only place code is
// compiled: at deploy or load, never at admission or run.
func compile(ctx context.Context, r wazero.Runtime, wasi map[string]api.FunctionDefinition, d Digest, binary []byte) (*module, error) {
	shape, err := scanModule(binary)
	if err != nil {
		if err == errMalformed {
			return nil, &ArtifactError{Digest: d, Err: ErrInvalidModule, Cause: err}
		}
		return nil, &ArtifactError{Digest: d, Err: err}
	}
	// wazero checks ctx between functions only when it compiles on more
	// than one worker: two at least, so that a deploy whose client has
	// gone stops after the functions in hand (the module limits keep one
	// function's compile short).
	ctx = experimental.WithCompilationWorkers(ctx, max(2, runtime.GOMAXPROCS(0)))
	compiled, err := r.CompileModule(ctx, withoutCustomSections(binary, &shape))
	if err != nil {
		return nil, &ArtifactError{Digest: d, Err: ErrInvalidModule, Cause: err}
	}
	minMemory, ok := checkCommand(compiled, wasi)
	if !ok {
		_ = compiled.Close(ctx)
		return nil, &ArtifactError{Digest: d, Err: ErrNotCommand}
	}
	return &module{digest: d, compiled: compiled, minMemory: minMemory}, nil
}

// checkCommand reports whether compiled is a WASI command (see
// ErrNotCommand) and the initial size of its memory in bytes.
func checkCommand(compiled wazero.CompiledModule, wasi map[string]api.FunctionDefinition) (minMemory uint64, ok bool) {
	start := compiled.ExportedFunctions()["_start"]
	if start == nil || len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		return 0, false
	}
	if len(compiled.ImportedMemories()) != 0 {
		return 0, false
	}
	memories := compiled.ExportedMemories()
	memory := memories["memory"]
	if len(memories) != 1 || memory == nil {
		return 0, false
	}
	for _, f := range compiled.ImportedFunctions() {
		moduleName, name, _ := f.Import()
		provided := wasi[name]
		if moduleName != wasi_snapshot_preview1.ModuleName || provided == nil ||
			!slices.Equal(f.ParamTypes(), provided.ParamTypes()) || !slices.Equal(f.ResultTypes(), provided.ResultTypes()) {
			return 0, false
		}
	}
	return uint64(memory.Min()) * pageBytes, true
}

// pageBytes is the size of a WebAssembly memory page.
const pageBytes = 65536
