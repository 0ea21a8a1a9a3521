package guest

// scanCode measures every function body.
func scanCode(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxFunctions, ErrTooManyFunctions)
	if err != nil {
		return err
	}
	if int(n) != len(shape.functionTypes) {
		// Bodies without types, or types without bodies: wazero refuses it
		// too.
		return errMalformed
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
		if int(shape.functionTypes[i]) >= len(shape.typeParams) {
			// No such type: wazero refuses it too.
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
			if op == 0x04 {
				// An if begins two basic blocks: its arm and what follows.
				blocks++
			}
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
			if op == 0x05 || op == 0x0c || op == 0x0d || op == 0x0e { // else, br, br_if, br_table: each ends a basic block
				blocks++
				if blocks > MaxBlocksPerFunction {
					return ErrTooManyBlocks
				}
				shape.maxBlocks = max(shape.maxBlocks, blocks)
			}
			if err := r.plainInstruction(op, shape); err != nil {
				return err
			}
		}
	}
	// Ran off the body before the function's end.
	return errMalformed
}

// plainInstruction reads the immediates of a one-byte opcode other than
// block, loop, if, end and the 0xFC and 0xFD prefixes; errMalformed for
// an opcode outside the 2.0 instruction set.
func (r *wasmReader) plainInstruction(op byte, shape *moduleShape) error {
	switch {
	case op == 0x00 || op == 0x01 || op == 0x05 || op == 0x0f: // unreachable, nop, else, return
	case op == 0x0c || op == 0x0d: // br, br_if
		r.u32()
	case op == 0x0e: // br_table: a vector of labels, then the default
		n, err := count(r, MaxBrTableLabels, ErrBrTableTooLarge)
		if err != nil {
			return err
		}
		shape.maxLabels = max(shape.maxLabels, int(n))
		shape.labelWork += uint64(n) * uint64(n)
		if shape.labelWork > MaxLabelWork {
			return ErrLabelWork
		}
		for ; n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect: type index, table index
		r.u32()
		r.u32()
	case op == 0x1a || op == 0x1b: // drop, select
	case op == 0x1c: // select with a vector of value types: one, in 2.0
		if r.u32() != 1 || !r.valueType() {
			return errMalformed
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
		if !r.referenceType() {
			return errMalformed
		}
	case op == 0xd1: // ref.is_null
	case op == 0xd2: // ref.func
		r.u32()
	default:
		return errMalformed
	}
	if r.err != nil {
		return errMalformed
	}
	return nil
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
