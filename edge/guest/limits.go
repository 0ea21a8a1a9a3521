package guest

import (
	"errors"
	"fmt"
)

// Module limits, checked by scanning the binary before wazero compiles it
// (see scan.go). wazero's compile time grows faster than linearly with
// the blocks in one function, and an instantiated table costs the host
// memory no grant sees, so a deployment could otherwise stall the node
// for minutes or take its memory. Each limit leaves room above what the
// Go toolchain's wasip1 output needs (a small Go guest: 2.6 MB, 1,776
// functions, block nesting 549); see docs/latentd.md for the figures.
const (
	// MaxModuleBytes bounds a module's binary.
	MaxModuleBytes = 32 << 20
	// MaxFunctions bounds the functions a module defines.
	MaxFunctions = 100_000
	// MaxFunctionBytes bounds one function body's encoding.
	MaxFunctionBytes = 1 << 20
	// MaxLocals bounds one function's locals, its parameters included.
	MaxLocals = 50_000
	// MaxBlockNesting bounds how deeply block, loop and if nest in one
	// function.
	MaxBlockNesting = 4_096
	// MaxBlocksPerFunction bounds the blocks, loops and ifs in one
	// function, nested or not.
	MaxBlocksPerFunction = 8_192
	// MaxBlockWork bounds the sum, over a module's functions, of the
	// square of each one's blocks, loops and ifs: wazero's compile time
	// grows with that square, so this bounds the module's compile time
	// where MaxBlocksPerFunction alone would let many functions at that
	// limit add up to minutes.
	MaxBlockWork = 1 << 28
	// MaxFunctionVariableWork bounds one function's variables (parameters
	// and locals) times its deepest nesting: wazero's SSA construction may
	// give every enclosing block a parameter per variable, so compile
	// time and memory grow faster than that product (1,000 locals in
	// 1,000 nested loops: 3 s and 214 MB in a 7 KB module).
	MaxFunctionVariableWork = 1 << 17
	// MaxVariableWork bounds the sum of that product over a module's
	// functions.
	MaxVariableWork = 1 << 22
	// MaxTableEntries bounds the initial entries of a module's tables
	// together (8 bytes of host memory each).
	MaxTableEntries = 1 << 20
)

// Errors for a module refused by a limit or a rule, before compiling.
// Each arrives wrapped in an [*ArtifactError] and names its limit; the
// node answers them as it answers any module it cannot run (latentd:
// 422).
var (
	// ErrModuleTooLarge: the binary is over MaxModuleBytes.
	ErrModuleTooLarge = fmt.Errorf("guest: module refused: larger than the limit of %d bytes", MaxModuleBytes)
	// ErrTooManyFunctions: the module defines more than MaxFunctions
	// functions.
	ErrTooManyFunctions = fmt.Errorf("guest: module refused: defines more than the limit of %d functions", MaxFunctions)
	// ErrFunctionTooLarge: a function body is over MaxFunctionBytes.
	ErrFunctionTooLarge = fmt.Errorf("guest: module refused: a function body is larger than the limit of %d bytes", MaxFunctionBytes)
	// ErrTooManyLocals: a function declares more than MaxLocals locals.
	ErrTooManyLocals = fmt.Errorf("guest: module refused: a function declares more than the limit of %d locals", MaxLocals)
	// ErrBlockNesting: blocks nest deeper than MaxBlockNesting in a
	// function.
	ErrBlockNesting = fmt.Errorf("guest: module refused: blocks nest deeper than the limit of %d", MaxBlockNesting)
	// ErrTooManyBlocks: a function has more than MaxBlocksPerFunction
	// blocks, loops and ifs.
	ErrTooManyBlocks = fmt.Errorf("guest: module refused: a function has more than the limit of %d blocks", MaxBlocksPerFunction)
	// ErrBlockWork: the module's functions together pass MaxBlockWork.
	ErrBlockWork = fmt.Errorf("guest: module refused: its functions' blocks pass the compile-work limit of %d (the sum of each function's blocks squared)", MaxBlockWork)
	// ErrVariableWork: a function's locals times its nesting pass
	// MaxFunctionVariableWork, or the module's sum passes MaxVariableWork.
	ErrVariableWork = fmt.Errorf("guest: module refused: locals times block nesting pass the compile-work limit of %d in a function or %d in the module", MaxFunctionVariableWork, MaxVariableWork)
	// ErrTableTooLarge: the module's tables start with more than
	// MaxTableEntries entries together.
	ErrTableTooLarge = fmt.Errorf("guest: module refused: its tables start with more than the limit of %d entries", MaxTableEntries)
	// ErrTableGrowth: the module's code can grow or fill a table at run
	// time (table.grow, table.fill), which costs host memory no grant
	// sees.
	ErrTableGrowth = errors.New("guest: module refused: it can grow or fill a table at run time (table.grow, table.fill)")
	// ErrStartSection: the module has a start section, which would run
	// during instantiation, before fuel metering; a WASI command starts
	// in _start.
	ErrStartSection = errors.New("guest: module refused: it has a start section (a WASI command starts in _start)")
)
