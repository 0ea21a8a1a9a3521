package guest

import (
	"errors"
	"fmt"
)

// Errors. Each is a fixed value; compare with errors.Is. Errors about one
// artifact arrive wrapped in an [*ArtifactError] that names it.
var (
	// ErrBadDigest: a digest is not "sha256:" followed by 64 lowercase
	// hexadecimal digits.
	ErrBadDigest = errors.New("guest: artifact digest is not sha256:<64 lowercase hex digits>")
	// ErrDigestMismatch: an artifact's bytes do not hash to its digest,
	// either as uploaded (Put) or as read back from disk (Load).
	ErrDigestMismatch = errors.New("guest: artifact bytes do not match the digest")
	// ErrArtifactNotFound: the store holds no file for the digest.
	ErrArtifactNotFound = errors.New("guest: artifact not found")
	// ErrArtifactTooLarge: an artifact is over the store's size limit.
	ErrArtifactTooLarge = errors.New("guest: artifact larger than the store's limit")
	// ErrArtifactIO: reading or writing the artifact file failed; the
	// ArtifactError's Cause says how.
	ErrArtifactIO = errors.New("guest: artifact file could not be read or written")
	// ErrInvalidModule: the artifact does not decode, validate or compile
	// as a WebAssembly module under the backend's runtime limits.
	ErrInvalidModule = errors.New("guest: artifact is not a valid WebAssembly module")
	// ErrNotCommand: the module is valid but not a WASI command: it must
	// export a "_start" function taking and returning nothing and a memory
	// named "memory", import no memory, table or global, and import
	// functions only from wasi_snapshot_preview1, each of which the
	// runtime provides.
	ErrNotCommand = errors.New("guest: module is not a WASI command")
	// ErrTooManyModules: a deployment would keep more compiled modules
	// than the backend's MaxModules.
	ErrTooManyModules = errors.New("guest: compiled module cache is full")
	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("guest: backend closed")
)

// Errors for a module refused by a limit or a rule, before compiling.
// Each arrives wrapped in an [*ArtifactError] and names its limit; the
// node answers them as it answers any module it cannot run (latentd:
// 422).
var (
	// ErrModuleRefused: the module breaks one of the rules or limits
	// below; every error of this block matches it with errors.Is.
	ErrModuleRefused = errors.New("guest: module refused by the node's module limits")
	// ErrModuleTooLarge: the binary is over MaxModuleBytes.
	ErrModuleTooLarge = refusal("guest: module refused: larger than the limit of %d bytes", MaxModuleBytes)
	// ErrTooManyFunctions: the module defines more than MaxFunctions
	// functions.
	ErrTooManyFunctions = refusal("guest: module refused: defines more than the limit of %d functions", MaxFunctions)
	// ErrFunctionTooLarge: a function body is over MaxFunctionBytes.
	ErrFunctionTooLarge = refusal("guest: module refused: a function body is larger than the limit of %d bytes", MaxFunctionBytes)
	// ErrTooManyLocals: a function declares more than MaxLocals locals.
	ErrTooManyLocals = refusal("guest: module refused: a function declares more than the limit of %d locals", MaxLocals)
	// ErrBlockNesting: blocks nest deeper than MaxBlockNesting in a
	// function.
	ErrBlockNesting = refusal("guest: module refused: blocks nest deeper than the limit of %d", MaxBlockNesting)
	// ErrTooManyBlocks: a function has more than MaxBlocksPerFunction
	// blocks, loops, ifs (counted twice), elses and branches.
	ErrTooManyBlocks = refusal("guest: module refused: a function has more than the limit of %d blocks and branches", MaxBlocksPerFunction)
	// ErrBlockWork: the module's functions together pass MaxBlockWork.
	ErrBlockWork = refusal("guest: module refused: its functions' blocks and branches pass the compile-work limit of %d (the sum of each function's blocks and branches squared)", MaxBlockWork)
	// ErrVariableWork: a function's locals times its nesting pass
	// MaxFunctionVariableWork, or the module's sum passes MaxVariableWork.
	ErrVariableWork = refusal("guest: module refused: locals times block nesting pass the compile-work limit of %d in a function or %d in the module", MaxFunctionVariableWork, MaxVariableWork)
	// ErrTableTooLarge: the module's tables start with more than
	// MaxTableEntries entries together.
	ErrTableTooLarge = refusal("guest: module refused: its tables start with more than the limit of %d entries", MaxTableEntries)
	// ErrTableGrowth: the module's code can grow or fill a table at run
	// time (table.grow, table.fill), which costs host memory no grant
	// sees.
	ErrTableGrowth = refusal("guest: module refused: it can grow or fill a table at run time (table.grow, table.fill)")
	// ErrStartSection: the module has a start section, which would run
	// during instantiation, before fuel metering; a WASI command starts
	// in _start.
	ErrStartSection = refusal("guest: module refused: it has a start section (a WASI command starts in _start)")
	// ErrBrTableTooLarge: a br_table has more than MaxBrTableLabels
	// labels.
	ErrBrTableTooLarge = refusal("guest: module refused: a br_table has more than the limit of %d labels", MaxBrTableLabels)
	// ErrLabelWork: the module's br_tables together pass MaxLabelWork.
	ErrLabelWork = refusal("guest: module refused: its br_tables pass the compile-work limit of %d (the sum of each one's labels squared)", MaxLabelWork)
	// ErrInstanceTooLarge: an instantiation of the module would allocate
	// more than MaxInstanceBytes on the host (its tables, globals,
	// element and data segments and imports together).
	ErrInstanceTooLarge = refusal("guest: module refused: its instantiation would allocate more than the limit of %d bytes (tables, globals, element and data segments, imports)", MaxInstanceBytes)
	// ErrTooManyTypes: the module declares more than MaxTypes function
	// types.
	ErrTooManyTypes = refusal("guest: module refused: declares more than the limit of %d function types", MaxTypes)
	// ErrTypeTooLarge: a function type has more than MaxTypeValues
	// parameters and results.
	ErrTypeTooLarge = refusal("guest: module refused: a function type has more than the limit of %d parameters and results", MaxTypeValues)
	// ErrTooManyImports: the module has more than MaxImports imports.
	ErrTooManyImports = refusal("guest: module refused: has more than the limit of %d imports", MaxImports)
	// ErrTooManyTables: the module defines more than MaxTables tables.
	ErrTooManyTables = refusal("guest: module refused: defines more than the limit of %d tables", MaxTables)
	// ErrTooManyMemories: the module defines more than one memory.
	ErrTooManyMemories = refusal("guest: module refused: defines more than the limit of %d memory", 1)
	// ErrTooManyGlobals: the module defines more than MaxGlobals globals.
	ErrTooManyGlobals = refusal("guest: module refused: defines more than the limit of %d globals", MaxGlobals)
	// ErrTooManyExports: the module has more than MaxExports exports.
	ErrTooManyExports = refusal("guest: module refused: has more than the limit of %d exports", MaxExports)
	// ErrTooManyElementSegments: the module has more than
	// MaxElementSegments element segments.
	ErrTooManyElementSegments = refusal("guest: module refused: has more than the limit of %d element segments", MaxElementSegments)
	// ErrTooManyElementEntries: the module's element segments hold more
	// than MaxElementEntries entries together.
	ErrTooManyElementEntries = refusal("guest: module refused: its element segments hold more than the limit of %d entries", MaxElementEntries)
	// ErrTooManyDataSegments: the module has (or its data count section
	// announces) more than MaxDataSegments data segments.
	ErrTooManyDataSegments = refusal("guest: module refused: has more than the limit of %d data segments", MaxDataSegments)
)

// refusedError is an error of the block above: a fixed message that
// matches ErrModuleRefused.
type refusedError struct{ message string }

func (e *refusedError) Error() string { return e.message }

// Is makes every refusal match ErrModuleRefused.
func (e *refusedError) Is(target error) bool { return target == ErrModuleRefused }

func refusal(format string, args ...any) error {
	return &refusedError{message: fmt.Sprintf(format, args...)}
}

// The call stacks and instances of the node's cells (see stack.go and
// instance.go).
var (
	// ErrStackMemory: the machine's memory cannot hold the worst-case call
	// stacks and instances of as many guests as the cells run at once, and
	// the guest memories kept for the next guests (cells times
	// PerCellHostBytes).
	ErrStackMemory = fmt.Errorf("guest: memory cannot hold a %d-byte call stack, a %d-byte instance and a %d-byte kept guest memory for every cell",
		StackCeilingBytes, InstanceCeilingBytes, RetainedMemoryBytes)
)

// ArtifactError is an error about one artifact: the digest (and, where a
// file was involved, its path), the fixed reason (one of the errors
// above) and the underlying cause, if any, for logs. Its message holds
// only the digest, the path and the fixed reason.
type ArtifactError struct {
	Digest Digest
	// File is the artifact's path in the store; empty when no file was
	// involved.
	File string
	// Err is the fixed reason.
	Err error
	// Cause is the underlying error (an I/O error, the runtime's compile
	// error), or nil. It is not part of the message.
	Cause error
}

func (e *ArtifactError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("guest: artifact %s (%s): %s", e.Digest, e.File, trimPrefix(e.Err))
	}
	return fmt.Sprintf("guest: artifact %s: %s", e.Digest, trimPrefix(e.Err))
}

// Unwrap gives both the reason and the cause to errors.Is and errors.As.
func (e *ArtifactError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

func trimPrefix(err error) string {
	const prefix = "guest: "
	s := err.Error()
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// Causes of an interruption the backend itself decides, read back from
// the run's context.
var (
	errFuelExhausted  = errors.New("guest: cpu fuel exhausted")
	errOutputTooLarge = errors.New("guest: standard output over the response bound")
)

// errMalformed is the module scanner's one decoding error: the binary
// does not decode as the scanner reads it (truncated, overlong LEB128, an
// unknown opcode or section). It reaches callers as ErrInvalidModule.
var errMalformed = errors.New("guest: module does not decode")
