package guest

// Module limits, checked by scanning the binary before wazero decodes it
// (see scan.go). wazero's decoder allocates for a count before it reads
// the items, its compile time grows faster than linearly with the basic
// blocks in one function and the labels of a br_table, and an instance's
// tables, globals and segments cost the host memory no grant sees, so a
// deployment could otherwise stall the node for minutes or take its
// memory. Each limit leaves room above what the Go toolchain's wasip1
// output needs (TestGoGuestsPassTheModuleLimitsWithRoom: the repository's
// guest within half of each); see docs/latentd.md for the figures and
// each limit's measured cost.
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
	// MaxBlocksPerFunction bounds the blocks, loops, ifs (twice each: an
	// if begins its arm and what follows), elses and branches (br, br_if,
	// br_table) in one function, nested or not: each begins or ends a
	// basic block, and wazero's compile time grows with the square of a
	// function's basic blocks (4,096 ifs in a row: 0.35 s; 10,000 br_ifs:
	// 1.9 s).
	MaxBlocksPerFunction = 4_096
	// MaxBlockWork bounds the sum, over a module's functions, of the
	// square of each one's blocks and branches, so that many functions at
	// the limit above cannot add up to minutes.
	MaxBlockWork = 1 << 25
	// MaxFunctionVariableWork bounds one function's variables (parameters
	// and locals) times its deepest nesting: wazero's SSA construction may
	// give every enclosing block a parameter per variable, so compile
	// time and memory grow faster than that product (1,000 locals in
	// 1,000 nested loops: 3 s and 214 MB in a 7 KB module).
	MaxFunctionVariableWork = 1 << 17
	// MaxVariableWork bounds the sum of that product over a module's
	// functions.
	MaxVariableWork = 1 << 21
	// MaxTableEntries bounds the initial entries of a module's tables
	// together (8 bytes of host memory each).
	MaxTableEntries = 1 << 20
	// MaxBrTableLabels bounds the labels of one br_table: wazero's compile
	// time grows with their square.
	MaxBrTableLabels = 4_096
	// MaxLabelWork bounds the sum, over a module's br_tables, of the
	// square of each one's labels.
	MaxLabelWork = 1 << 26
)

// Module limits on the counts of the other sections. wazero's decoder
// allocates for a vector's count before it reads an item, and every
// instantiation allocates per global, table, element entry, segment and
// import, outside any grant; the scanner holds every count to the
// section's bytes and to these limits, which bound what one instance
// costs the host (InstanceCeilingBytes).
const (
	// MaxTypes bounds the function types a module declares.
	MaxTypes = 10_000
	// MaxTypeValues bounds one function type's parameters and results
	// together: wazero keeps a string key of every type for the node's
	// life (see docs/latentd.md).
	MaxTypeValues = 1_000
	// MaxImports bounds a module's imports.
	MaxImports = 1_000
	// MaxTables bounds the tables a module defines.
	MaxTables = 100
	// MaxGlobals bounds the globals a module defines.
	MaxGlobals = 10_000
	// MaxExports bounds a module's exports.
	MaxExports = 10_000
	// MaxElementSegments bounds a module's element segments.
	MaxElementSegments = 10_000
	// MaxElementEntries bounds the entries of a module's element segments
	// together: each becomes a function reference at every instantiation.
	MaxElementEntries = 1 << 15
	// MaxInstanceBytes bounds what an instantiation of the module
	// allocates on the host, outside the grant, as the scanner estimates
	// it from the counts above (see instanceBytes): the counts' own limits
	// bound each section, this bounds them together.
	MaxInstanceBytes = 8 << 20
	// MaxDataSegments bounds a module's data segments (and the count its
	// data count section gives): Go's wasip1 output has many (28,611 in
	// the repository's guest).
	MaxDataSegments = 1 << 18
)

// What an instantiation allocates on the host per item, in bytes, as
// measured by TestEachLimitsCostAtTheLimit (wazero v1.12) and rounded
// up: a table entry is a reference; a global an instance and its
// initializer's evaluation; an element entry a function instance, a
// reference and the evaluation; an element or data segment its instance
// and, for an active one, its offset's evaluation; an import a function
// instance and its resolution.
const (
	instanceBytesPerTableEntry     = 8
	instanceBytesPerGlobal         = 128
	instanceBytesPerElementEntry   = 96
	instanceBytesPerElementSegment = 32
	instanceBytesPerDataSegment    = 32
	instanceBytesPerImport         = 128
)

// instanceBytes estimates what one instantiation of a module of shape
// allocates on the host outside the grant (its linear memory aside).
func instanceBytes(shape *moduleShape) uint64 {
	return shape.tableEntries*instanceBytesPerTableEntry +
		uint64(shape.globals)*instanceBytesPerGlobal +
		shape.elementEntries*instanceBytesPerElementEntry +
		uint64(shape.elementSegments)*instanceBytesPerElementSegment +
		uint64(shape.dataSegments)*instanceBytesPerDataSegment +
		uint64(shape.imports)*instanceBytesPerImport
}
