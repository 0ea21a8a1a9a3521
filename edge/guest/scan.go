package guest

// scan reads a module's binary once, before wazero compiles it, and
// refuses what the runtime would accept but the node cannot afford: see
// limits.go for the rules and their figures. wazero's compiled module
// exposes neither tables nor opcodes, so the scanner decodes the code
// section itself, every instruction with all its immediates, in one pass
// and in time linear in the module's size. It is no validator: wazero
// validates afterwards. Its one duty is never to misread, so that an
// instruction it passes is the instruction wazero compiles; an opcode it
// does not know (anything outside the WebAssembly 2.0 features the
// runtime enables) is refused, not skipped.

// moduleShape is what the scan measured, for the limits and the tests.
type moduleShape struct {
	functions     int    // functions the module defines (imports excluded)
	maxBodyBytes  int    // largest function body
	maxLocals     uint64 // most locals one function declares
	maxNesting    int    // deepest block, loop or if nesting in one function
	maxBlocks     int    // most blocks, loops and ifs in one function
	blockWork     uint64 // the sum over functions of blocks squared
	variableWork  uint64 // the sum over functions of variables times nesting
	tableEntries  uint64 // initial entries of every table the module defines
	tableGrowth   bool   // some function has table.grow or table.fill
	startSection  bool
	nonFuncImport bool // an import of a table, memory, global or tag

	// Scanning state: each type's parameter count, and each defined
	// function's type index.
	typeParams    []uint32
	functionTypes []uint32
}

// Section IDs of the WebAssembly binary format.
const (
	sectionCustom    = 0
	sectionType      = 1
	sectionImport    = 2
	sectionFunction  = 3
	sectionTable     = 4
	sectionStart     = 8
	sectionCode      = 10
	sectionDataCount = 12
)

// scanModule measures binary. It stops at the first thing it cannot
// decode (errMalformed) or the first limit passed (that limit's error),
// so a hostile module costs no more than one pass over its bytes.
func scanModule(binary []byte) (moduleShape, error) {
	var shape moduleShape
	if len(binary) > MaxModuleBytes {
		return shape, ErrModuleTooLarge
	}
	if len(binary) < 8 || string(binary[:8]) != "\x00asm\x01\x00\x00\x00" {
		return shape, errMalformed
	}
	r := &wasmReader{b: binary, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.off {
			return shape, errMalformed
		}
		section := &wasmReader{b: r.b[:r.off+size], off: r.off}
		r.off += size
		var err error
		switch id {
		case sectionImport:
			err = scanImports(section, &shape)
		case sectionType:
			err = scanTypes(section, &shape)
		case sectionFunction:
			err = scanFunctions(section, &shape)
		case sectionTable:
			err = scanTables(section, &shape)
		case sectionStart:
			shape.startSection = true
		case sectionCode:
			err = scanCode(section, &shape)
		default:
			if id > sectionDataCount {
				err = errMalformed
			}
		}
		if err != nil {
			return shape, err
		}
		if section.err != nil {
			return shape, errMalformed
		}
	}
	// The rules are checked once the whole module has been read, so that a
	// module the scanner cannot read is always refused as such.
	switch {
	case shape.tableGrowth:
		return shape, ErrTableGrowth
	case shape.startSection:
		return shape, ErrStartSection
	case shape.nonFuncImport:
		return shape, ErrNotCommand
	}
	return shape, nil
}

// scanImports refuses imports other than functions: a WASI command
// imports no table, memory or global, and none could be resolved.
func scanImports(r *wasmReader, shape *moduleShape) error {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		r.name()
		r.name()
		switch r.byte() {
		case 0x00: // function: a type index
			r.u32()
		case 0x01: // table: reference type, limits
			if !r.referenceType() || !r.limits() {
				return errMalformed
			}
			shape.nonFuncImport = true
		case 0x02: // memory: limits
			if !r.limits() {
				return errMalformed
			}
			shape.nonFuncImport = true
		case 0x03: // global: value type, mutability
			if !r.valueType() {
				return errMalformed
			}
			r.byte()
			shape.nonFuncImport = true
		default:
			return errMalformed
		}
	}
	return nil
}

// functionCount reads the length of a vector of functions or function
// types, refusing one over MaxFunctions before anything is held for it.
func functionCount(r *wasmReader) (uint32, error) {
	n := r.u32()
	if n > MaxFunctions {
		return 0, ErrTooManyFunctions
	}
	return n, nil
}

// scanTypes records each function type's parameter count: parameters
// are a function's first locals.
func scanTypes(r *wasmReader, shape *moduleShape) error {
	n, err := functionCount(r) // types are no cheaper to hold than functions
	if err != nil {
		return err
	}
	shape.typeParams = make([]uint32, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		if r.byte() != 0x60 {
			return errMalformed
		}
		params := r.u32()
		for i := params; i > 0; i-- {
			if !r.valueType() {
				return errMalformed
			}
		}
		for results := r.u32(); results > 0 && r.err == nil; results-- {
			if !r.valueType() {
				return errMalformed
			}
		}
		shape.typeParams = append(shape.typeParams, params)
	}
	return nil
}

// scanFunctions records each defined function's type.
func scanFunctions(r *wasmReader, shape *moduleShape) error {
	n, err := functionCount(r)
	if err != nil {
		return err
	}
	shape.functionTypes = make([]uint32, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		shape.functionTypes = append(shape.functionTypes, r.u32())
	}
	return nil
}

// scanTables adds up the tables' initial sizes: wazero allocates a
// table's initial entries at instantiation, outside any grant.
func scanTables(r *wasmReader, shape *moduleShape) error {
	for n := r.u32(); n > 0 && r.err == nil; n-- {
		if !r.referenceType() {
			return errMalformed
		}
		min, ok := r.limitsMin()
		if !ok {
			return errMalformed
		}
		shape.tableEntries += uint64(min)
		if shape.tableEntries > MaxTableEntries {
			return ErrTableTooLarge
		}
	}
	return nil
}

// scanCode measures every function body.
func scanCode(r *wasmReader, shape *moduleShape) error {
	n := r.u32()
	if r.err != nil {
		return errMalformed
	}
	if n > MaxFunctions {
		return ErrTooManyFunctions
	}
	shape.functions = int(n)
	for i := range int(n) {
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.off {
			return errMalformed
		}
		if size > MaxFunctionBytes {
			return ErrFunctionTooLarge
		}
		shape.maxBodyBytes = max(shape.maxBodyBytes, size)
		body := &wasmReader{b: r.b[:r.off+size], off: r.off}
		r.off += size
		if i >= len(shape.functionTypes) || int(shape.functionTypes[i]) >= len(shape.typeParams) {
			// No type for the body: wazero refuses it too.
			return errMalformed
		}
		params := shape.typeParams[shape.functionTypes[i]]
		if err := scanBody(body, uint64(params), shape); err != nil {
			return err
		}
	}
	return nil
}

// scanBody reads one function body: its locals (after params
// parameters), then its instructions up to the end that closes the
// function, which must be the body's last byte.
func scanBody(r *wasmReader, params uint64, shape *moduleShape) error {
	locals := params
	if locals > MaxLocals {
		return ErrTooManyLocals
	}
	for groups := r.u32(); groups > 0 && r.err == nil; groups-- {
		locals += uint64(r.u32())
		if !r.valueType() {
			return errMalformed
		}
		if locals > MaxLocals {
			return ErrTooManyLocals
		}
	}
	shape.maxLocals = max(shape.maxLocals, locals)
	depth, blocks, nesting := 0, 0, 0
	for r.err == nil && r.off < len(r.b) {
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if
			if !r.blockType() {
				return errMalformed
			}
			depth++
			blocks++
			if depth > MaxBlockNesting {
				return ErrBlockNesting
			}
			if blocks > MaxBlocksPerFunction {
				return ErrTooManyBlocks
			}
			nesting = max(nesting, depth)
			shape.maxNesting = max(shape.maxNesting, depth)
			shape.maxBlocks = max(shape.maxBlocks, blocks)
		case op == 0x0b: // end
			if depth == 0 {
				// The function's own end: nothing may follow it.
				if r.off != len(r.b) {
					return errMalformed
				}
				shape.blockWork += uint64(blocks) * uint64(blocks)
				if shape.blockWork > MaxBlockWork {
					return ErrBlockWork
				}
				work := locals * uint64(nesting)
				shape.variableWork += work
				if work > MaxFunctionVariableWork || shape.variableWork > MaxVariableWork {
					return ErrVariableWork
				}
				return nil
			}
			depth--
		case op == 0xfc:
			if err := r.miscInstruction(shape); err != nil {
				return err
			}
		case op == 0xfd:
			if !r.vectorInstruction() {
				return errMalformed
			}
		default:
			if !r.plainInstruction(op) {
				return errMalformed
			}
		}
	}
	// Ran off the body before the function's end.
	return errMalformed
}

// wasmReader decodes the binary format from b[off:]. The first error
// sticks: every later read returns zero, so a caller checks err once
// after a run of reads.
type wasmReader struct {
	b   []byte
	off int
	err error
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.err = errMalformed
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wasmReader) skip(n int) {
	if r.err != nil || n > len(r.b)-r.off {
		r.err = errMalformed
		return
	}
	r.off += n
}

// u32 decodes an unsigned LEB128 of at most 32 bits (5 bytes; the last
// byte's unused bits must be zero, as the format requires).
func (r *wasmReader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift == 28 && c&0xf0 != 0 {
			r.err = errMalformed
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errMalformed
	return 0
}

// signed skips a signed LEB128 of at most bits bits (32, 33 or 64),
// checking its length and the last byte's unused bits as the format
// requires (they must all equal the sign bit), and returns the value's
// sign and its low bits, enough to tell a block type's index from a
// negative one.
func (r *wasmReader) signed(bits int) (negative bool, value int64) {
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return false, 0
		}
		if shift < 63 {
			value |= int64(c&0x7f) << shift
		}
		last := shift+7 >= bits
		if last {
			// The unused high bits of the final byte must be copies of the
			// sign bit, and no continuation may follow.
			used := bits - shift // value bits in this byte, 1..7
			rest := (c & 0x7f) >> (used - 1)
			if c&0x80 != 0 || (rest != 0 && rest != 0x7f>>(used-1)) {
				r.err = errMalformed
				return false, 0
			}
		}
		if c&0x80 == 0 {
			negative = c&0x40 != 0
			return negative, value
		}
	}
}

// name skips a UTF-8 name (wazero checks the encoding).
func (r *wasmReader) name() {
	r.skip(int(r.u32()))
}

// valueType reads a value type of the 2.0 features: number, vector or
// reference type.
func (r *wasmReader) valueType() bool {
	switch r.byte() {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return r.err == nil
	}
	return false
}

// referenceType reads funcref or externref.
func (r *wasmReader) referenceType() bool {
	switch r.byte() {
	case 0x70, 0x6f:
		return r.err == nil
	}
	return false
}

// limitsMin reads limits (a flag, the minimum, and the maximum when the
// flag says there is one) and returns the minimum. Flags 0x02 and 0x03
// (shared memory) are read too, for an imported memory; the runtime
// refuses them.
func (r *wasmReader) limitsMin() (uint32, bool) {
	flags := r.byte()
	min := r.u32()
	switch flags {
	case 0x00, 0x02:
	case 0x01, 0x03:
		r.u32()
	default:
		return 0, false
	}
	return min, r.err == nil
}

func (r *wasmReader) limits() bool {
	_, ok := r.limitsMin()
	return ok
}

// blockType reads a block type: empty (0x40), one value type, or a type
// index as a non-negative signed 33-bit LEB128.
func (r *wasmReader) blockType() bool {
	if r.err != nil || r.off >= len(r.b) {
		return false
	}
	switch r.b[r.off] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.off++
		return true
	}
	negative, _ := r.signed(33)
	return r.err == nil && !negative
}

// memarg reads a memory argument: alignment and offset.
func (r *wasmReader) memarg() {
	r.u32()
	r.u32()
}

// plainInstruction reads the immediates of a one-byte opcode other than
// block, loop, if, end and the 0xFC and 0xFD prefixes; false for an
// opcode outside the 2.0 instruction set.
func (r *wasmReader) plainInstruction(op byte) bool {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f: // unreachable, nop, else, return
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table: a vector of labels, then the default
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect: type index, table index
		r.u32()
		r.u32()
	case op == 0x1a || op == 0x1b: // drop, select
	case op == 0x1c: // select with a vector of value types
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			if !r.valueType() {
				return false
			}
		}
	case op >= 0x20 && op <= 0x26: // local.get/set/tee, global.get/set, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow: memory index
		r.u32()
	case op == 0x41: // i32.const
		r.signed(32)
	case op == 0x42: // i64.const
		r.signed(64)
	case op == 0x43: // f32.const
		r.skip(4)
	case op == 0x44: // f64.const
		r.skip(8)
	case op >= 0x45 && op <= 0xc4: // numeric and sign-extension instructions
	case op == 0xd0: // ref.null: a reference type
		switch r.byte() {
		case 0x70, 0x6f:
		default:
			return false
		}
	case op == 0xd1: // ref.is_null
	case op == 0xd2: // ref.func
		r.u32()
	default:
		return false
	}
	return r.err == nil
}

// miscInstruction reads a 0xFC-prefixed instruction: the saturating
// truncations, bulk memory and table instructions. table.grow and
// table.fill are refused: growing a table costs the host memory no grant
// sees, and filling is only useful after growing.
func (r *wasmReader) miscInstruction(shape *moduleShape) error {
	sub := r.u32()
	switch {
	case sub <= 7: // trunc_sat
	case sub == 8: // memory.init: data index, memory index
		r.u32()
		r.u32()
	case sub == 9: // data.drop
		r.u32()
	case sub == 10: // memory.copy: two memory indices
		r.u32()
		r.u32()
	case sub == 11: // memory.fill: memory index
		r.u32()
	case sub == 12 || sub == 14: // table.init (element, table), table.copy (table, table)
		r.u32()
		r.u32()
	case sub == 13 || sub == 16: // elem.drop, table.size
		r.u32()
	case sub == 15 || sub == 17: // table.grow, table.fill
		// A table index; refused once the whole module is read (see
		// scanModule).
		r.u32()
		shape.tableGrowth = true
	default:
		return errMalformed
	}
	if r.err != nil {
		return errMalformed
	}
	return nil
}

// vectorInstruction reads a 0xFD-prefixed (SIMD) instruction.
func (r *wasmReader) vectorInstruction() bool {
	sub := r.u32()
	if r.err != nil || sub > 0xff || unassignedVector[sub] {
		return false
	}
	switch {
	case sub <= 0x0b || sub == 0x5c || sub == 0x5d: // loads, store, load_zero
		r.memarg()
	case sub == 0x0c || sub == 0x0d: // v128.const, i8x16.shuffle: 16 bytes
		r.skip(16)
	case sub >= 0x15 && sub <= 0x22: // extract_lane, replace_lane: a lane index
		r.skip(1)
	case sub >= 0x54 && sub <= 0x5b: // load_lane, store_lane: memarg, lane index
		r.memarg()
		r.skip(1)
	}
	return r.err == nil
}

// unassignedVector marks the SIMD opcodes below 0x100 that the
// specification leaves unassigned.
var unassignedVector = func() (set [0x100]bool) {
	for _, op := range []int{0x9a, 0xa2, 0xa5, 0xa6, 0xaf, 0xb0, 0xb2, 0xb3, 0xb4, 0xbb,
		0xc2, 0xc5, 0xc6, 0xcf, 0xd0, 0xd2, 0xd3, 0xd4, 0xe2, 0xee} {
		set[op] = true
	}
	return set
}()
