package guest

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

// constantExpression reads an initializer: one constant instruction of
// the 2.0 features, then end.
func (r *wasmReader) constantExpression() bool {
	switch r.byte() {
	case 0x41: // i32.const
		r.signed(32)
	case 0x42: // i64.const
		r.signed(64)
	case 0x43: // f32.const
		r.skip(4)
	case 0x44: // f64.const
		r.skip(8)
	case 0x23, 0xd2: // global.get, ref.func: an index
		r.u32()
	case 0xd0: // ref.null: a reference type
		if !r.referenceType() {
			return false
		}
	case 0xfd: // v128.const, whose opcode wazero reads as one byte
		if r.byte() != 0x0c {
			return false
		}
		r.skip(16)
	default:
		return false
	}
	return r.byte() == 0x0b && r.err == nil
}

// memarg reads a memory argument: alignment and offset.
func (r *wasmReader) memarg() {
	r.u32()
	r.u32()
}
