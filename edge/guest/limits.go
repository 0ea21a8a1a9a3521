package guest

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
