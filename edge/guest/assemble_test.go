package guest_test

// A WebAssembly assembler for modules of any size: the binary format
// written out with LEB128 sizes, for the limit, table, start-section and
// stack tests (wasm_test.go's helpers take one-byte sizes only).

// uleb is v as unsigned LEB128.
func uleb(v uint64) []byte {
	var out []byte
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(out, b)
		}
		out = append(out, b|0x80)
	}
}

// anySection is one section of any size.
func anySection(id byte, content []byte) []byte {
	return concat([]byte{id}, uleb(uint64(len(content))), content)
}

// vector is a count followed by the items.
func vector(items ...[]byte) []byte {
	return concat(append([][]byte{uleb(uint64(len(items)))}, items...)...)
}

// body is one function body: a vector of local groups (each a count and a
// value type), the instructions, and the final end.
func body(locals []byte, instructions ...byte) []byte {
	b := concat(locals, instructions, []byte{0x0b})
	return concat(uleb(uint64(len(b))), b)
}

// noLocals is an empty vector of local groups.
var noLocals = []byte{0x00}

// guestModule is a WASI command assembled from parts. Type 0 is
// () -> (); every function has type 0; function 0 is exported as
// _start, and a memory of one page as "memory".
type guestModule struct {
	bodies [][]byte // each made by body
	types  [][]byte // extra function types after type 0, each 0x60 ...
	typeOf []byte   // each function's type index; nil: all type 0
	tables []byte   // the table section's content, or nil
	start  bool     // a start section naming function 1
	data   []byte   // the data section's content, or nil
	pages  byte     // initial memory pages; 0 means 1
}

func (g guestModule) bytes() []byte {
	pages := g.pages
	if pages == 0 {
		pages = 1
	}
	funcs := make([][]byte, len(g.bodies))
	for i := range funcs {
		funcs[i] = []byte{0x00}
		if g.typeOf != nil {
			funcs[i] = []byte{g.typeOf[i]}
		}
	}
	m := wasmModule(
		anySection(typeSection, vector(append([][]byte{{0x60, 0x00, 0x00}}, g.types...)...)),
		anySection(functionSection, vector(funcs...)),
	)
	if g.tables != nil {
		m = append(m, anySection(4, g.tables)...)
	}
	m = append(m, anySection(memorySection, []byte{0x01, 0x00, pages})...)
	m = append(m, anySection(exportSection, concat([]byte{0x02}, name("_start"), []byte{0x00, 0x00}, name("memory"), []byte{0x02, 0x00}))...)
	if g.start {
		m = append(m, anySection(8, []byte{0x01})...)
	}
	m = append(m, anySection(codeSection, vector(g.bodies...))...)
	if g.data != nil {
		m = append(m, anySection(11, g.data)...)
	}
	return m
}

// startBody makes a guest whose _start has instructions and no locals.
func startBody(instructions ...byte) guestModule {
	return guestModule{bodies: [][]byte{body(noLocals, instructions...)}}
}

// repeat is n copies of b.
func repeat(n int, b ...byte) []byte {
	out := make([]byte, 0, n*len(b))
	for range n {
		out = append(out, b...)
	}
	return out
}

// nestedLoops is a function body with locals i64 locals, depth loops
// nested, and every local read in the innermost.
func nestedLoops(locals, depth int) []byte {
	var reads []byte
	for i := range locals {
		reads = concat(reads, []byte{0x20}, uleb(uint64(i)), []byte{0x1a})
	}
	return body(concat([]byte{0x01}, uleb(uint64(locals)), []byte{0x7e}), concat(repeat(depth, 0x03, 0x40), reads, repeat(depth, 0x0b))...)
}

// oneTable is a table section with one funcref table of min entries.
func oneTable(min uint64) []byte { return concat([]byte{0x01, 0x70, 0x00}, uleb(min)) }
