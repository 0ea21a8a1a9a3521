package guest

// scan reads a module's binary once, before wazero decodes it, and
// refuses what the runtime would accept but the node cannot afford: see
// limits.go for the rules and their figures. It reads every section, in
// the order the format requires, and every vector in them item by item
// within its section's bytes, so that a count wazero's decoder would
// allocate for (it makes a slice of the count before it reads a single
// item) is never more than the bytes that carry the items, and never more
// than its limit. Custom sections (the "name" section included) are not
// read: compile hands wazero the module without them (see
// withoutCustomSections).
//
// wazero's compiled module exposes neither tables nor opcodes, so the
// scanner decodes the code section itself, every instruction with all its
// immediates, in one pass and in time linear in the module's size. It is
// no validator: wazero validates afterwards. Its one duty is never to
// misread, so that a module it passes is the module wazero decodes; an
// opcode or encoding it does not know (anything outside the WebAssembly
// 2.0 features the runtime enables) is refused, not skipped.

// moduleShape is what the scan measured, for the limits and the tests.
type moduleShape struct {
	types           int
	imports         int
	functions       int // functions the module defines (imports excluded)
	tables          int
	globals         int
	exports         int
	elementSegments int
	elementEntries  uint64 // entries of every element segment together
	dataSegments    int
	maxBodyBytes    int    // largest function body
	maxLocals       uint64 // most locals one function declares
	maxNesting      int    // deepest block, loop or if nesting in one function
	maxBlocks       int    // most blocks, loops and ifs in one function
	maxLabels       int    // most labels of one br_table
	blockWork       uint64 // the sum over functions of blocks and branches squared
	labelWork       uint64 // the sum over br_tables of labels squared
	variableWork    uint64 // the sum over functions of variables times nesting
	tableEntries    uint64 // initial entries of every table the module defines
	tableGrowth     bool   // some function has table.grow or table.fill
	startSection    bool
	nonFuncImport   bool // an import of a table, memory, global or tag
	// customSections are the [start, end) byte ranges of the custom
	// sections, id and size included, in order.
	customSections [][2]int

	// Scanning state: each type's parameter count, each defined
	// function's type index, and the data count section's count (-1 when
	// there is none).
	typeParams    []uint32
	functionTypes []uint32
	dataCount     int64
}

// Section IDs of the WebAssembly binary format.
const (
	sectionCustom    = 0
	sectionType      = 1
	sectionImport    = 2
	sectionFunction  = 3
	sectionTable     = 4
	sectionMemory    = 5
	sectionGlobal    = 6
	sectionExport    = 7
	sectionStart     = 8
	sectionElement   = 9
	sectionCode      = 10
	sectionData      = 11
	sectionDataCount = 12
)

// sectionRank is each non-custom section's place in the order the format
// requires: the data count section comes between element and code.
var sectionRank = [...]int{
	sectionType: 1, sectionImport: 2, sectionFunction: 3, sectionTable: 4, sectionMemory: 5,
	sectionGlobal: 6, sectionExport: 7, sectionStart: 8, sectionElement: 9, sectionDataCount: 10,
	sectionCode: 11, sectionData: 12,
}

// scanModule measures binary. It stops at the first thing it cannot
// decode (errMalformed) or the first limit passed (that limit's error),
// so a hostile module costs no more than one pass over its bytes and
// allocations bounded by the limits.
func scanModule(binary []byte) (moduleShape, error) {
	shape := moduleShape{dataCount: -1}
	if len(binary) > MaxModuleBytes {
		return shape, ErrModuleTooLarge
	}
	if len(binary) < 8 || string(binary[:8]) != "\x00asm\x01\x00\x00\x00" {
		return shape, errMalformed
	}
	r := &wasmReader{b: binary, off: 8}
	lastRank := 0
	for r.off < len(r.b) {
		begin := r.off
		id := r.byte()
		size := int(r.u32())
		if r.err != nil || size > len(r.b)-r.off {
			return shape, errMalformed
		}
		section := &wasmReader{b: r.b[:r.off+size], off: r.off}
		r.off += size
		if id == sectionCustom {
			// Never read: wazero does not see it (withoutCustomSections). Its
			// name must still be there, as the format requires.
			section.name()
			if section.err != nil {
				return shape, errMalformed
			}
			shape.customSections = append(shape.customSections, [2]int{begin, r.off})
			continue
		}
		if int(id) >= len(sectionRank) || sectionRank[id] <= lastRank {
			// Unknown (tags: exception handling), repeated or out of order.
			return shape, errMalformed
		}
		lastRank = sectionRank[id]
		if err := scanSection(id, section, &shape); err != nil {
			return shape, err
		}
		if section.err != nil || section.off != len(section.b) {
			// Cut short, or bytes left over: wazero refuses both.
			return shape, errMalformed
		}
	}
	if len(shape.functionTypes) != shape.functions ||
		(shape.dataCount >= 0 && shape.dataCount != int64(shape.dataSegments)) {
		return shape, errMalformed
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
	case instanceBytes(&shape) > MaxInstanceBytes:
		return shape, ErrInstanceTooLarge
	}
	return shape, nil
}

// scanSection reads one non-custom section's content.
func scanSection(id byte, r *wasmReader, shape *moduleShape) error {
	switch id {
	case sectionType:
		return scanTypes(r, shape)
	case sectionImport:
		return scanImports(r, shape)
	case sectionFunction:
		return scanFunctions(r, shape)
	case sectionTable:
		return scanTables(r, shape)
	case sectionMemory:
		return scanMemories(r)
	case sectionGlobal:
		return scanGlobals(r, shape)
	case sectionExport:
		return scanExports(r, shape)
	case sectionStart:
		r.u32()
		shape.startSection = true
	case sectionElement:
		return scanElements(r, shape)
	case sectionDataCount:
		// A count with no items after it: bounded by its limit alone.
		n := r.u32()
		if r.err == nil && n > MaxDataSegments {
			return ErrTooManyDataSegments
		}
		shape.dataCount = int64(n)
	case sectionCode:
		return scanCode(r, shape)
	case sectionData:
		return scanData(r, shape)
	}
	return nil
}

// count reads a vector's length and refuses one over limit (with
// tooMany) or one whose items, at least a byte each, could not fit in
// what is left of the section (errMalformed): so the length of every
// vector wazero's decoder allocates for is bounded twice.
func count(r *wasmReader, limit uint32, tooMany error) (uint32, error) {
	n := r.u32()
	switch {
	case r.err != nil:
		return 0, errMalformed
	case n > limit:
		return 0, tooMany
	case int(n) > len(r.b)-r.off:
		return 0, errMalformed
	}
	return n, nil
}

// scanTypes records each function type's parameter count: parameters
// are a function's first locals.
func scanTypes(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxTypes, ErrTooManyTypes)
	if err != nil {
		return err
	}
	shape.types = int(n)
	shape.typeParams = make([]uint32, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		if r.byte() != 0x60 {
			return errMalformed
		}
		params, err := count(r, MaxTypeValues, ErrTypeTooLarge)
		if err != nil {
			return err
		}
		for i := params; i > 0; i-- {
			if !r.valueType() {
				return errMalformed
			}
		}
		results, err := count(r, MaxTypeValues-params, ErrTypeTooLarge)
		if err != nil {
			return err
		}
		for ; results > 0; results-- {
			if !r.valueType() {
				return errMalformed
			}
		}
		shape.typeParams = append(shape.typeParams, params)
	}
	return nil
}

// scanImports refuses imports other than functions: a WASI command
// imports no table, memory or global, and none could be resolved.
func scanImports(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxImports, ErrTooManyImports)
	if err != nil {
		return err
	}
	shape.imports = int(n)
	for ; n > 0 && r.err == nil; n-- {
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
			if !r.valueType() || r.byte() > 0x01 {
				return errMalformed
			}
			shape.nonFuncImport = true
		default:
			return errMalformed
		}
	}
	return nil
}

// scanFunctions records each defined function's type.
func scanFunctions(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxFunctions, ErrTooManyFunctions)
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
	n, err := count(r, MaxTables, ErrTooManyTables)
	if err != nil {
		return err
	}
	shape.tables = int(n)
	for ; n > 0 && r.err == nil; n-- {
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

// scanMemories reads the memory section: a WASI command's one memory.
func scanMemories(r *wasmReader) error {
	n, err := count(r, 1, ErrTooManyMemories)
	if err != nil {
		return err
	}
	if n == 1 && !r.limits() {
		return errMalformed
	}
	return nil
}

// scanGlobals reads each global: its type and its initializer.
func scanGlobals(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxGlobals, ErrTooManyGlobals)
	if err != nil {
		return err
	}
	shape.globals = int(n)
	for ; n > 0 && r.err == nil; n-- {
		if !r.valueType() || r.byte() > 0x01 || !r.constantExpression() {
			return errMalformed
		}
	}
	return nil
}

// scanExports reads each export: a name, a kind and an index.
func scanExports(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxExports, ErrTooManyExports)
	if err != nil {
		return err
	}
	shape.exports = int(n)
	for ; n > 0 && r.err == nil; n-- {
		r.name()
		if r.byte() > 0x03 { // function, table, memory, global
			return errMalformed
		}
		r.u32()
	}
	return nil
}

// scanElements reads each element segment, in any of its eight
// encodings, counting its entries: wazero holds each entry of every
// segment in the compiled module, and makes a function reference of it
// at every instantiation.
func scanElements(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxElementSegments, ErrTooManyElementSegments)
	if err != nil {
		return err
	}
	shape.elementSegments = int(n)
	for ; n > 0 && r.err == nil; n-- {
		flags := r.u32()
		if r.err != nil || flags > 7 {
			return errMalformed
		}
		if flags&0b010 != 0 && flags&0b001 == 0 { // active with a table index
			r.u32()
		}
		if flags&0b001 == 0 && !r.constantExpression() { // active: an offset
			return errMalformed
		}
		if flags&0b011 != 0 { // not the legacy encoding: an element kind or type
			if flags&0b100 == 0 {
				if r.byte() != 0x00 { // elemkind funcref
					return errMalformed
				}
			} else if !r.referenceType() {
				return errMalformed
			}
		}
		entries, err := count(r, uint32(MaxElementEntries-shape.elementEntries), ErrTooManyElementEntries)
		if err != nil {
			return err
		}
		shape.elementEntries += uint64(entries)
		for ; entries > 0 && r.err == nil; entries-- {
			if flags&0b100 == 0 {
				r.u32() // a function index
			} else if !r.constantExpression() {
				return errMalformed
			}
		}
	}
	return nil
}

// scanData reads each data segment; its bytes are skipped, within the
// section.
func scanData(r *wasmReader, shape *moduleShape) error {
	n, err := count(r, MaxDataSegments, ErrTooManyDataSegments)
	if err != nil {
		return err
	}
	shape.dataSegments = int(n)
	for ; n > 0 && r.err == nil; n-- {
		switch r.u32() {
		case 0x00: // active, memory 0
		case 0x01: // passive
			r.name() // a vector of bytes, encoded as a name is
			continue
		case 0x02: // active, with a memory index
			r.u32()
		default:
			return errMalformed
		}
		if !r.constantExpression() {
			return errMalformed
		}
		r.name()
	}
	return nil
}

// withoutCustomSections is binary without the custom sections the scan
// found: wazero decodes a "name" section with counts it allocates for, and
// the runtime needs none of them. binary itself is returned when it has
// none.
func withoutCustomSections(binary []byte, shape *moduleShape) []byte {
	if len(shape.customSections) == 0 {
		return binary
	}
	out := make([]byte, 0, len(binary))
	from := 0
	for _, s := range shape.customSections {
		out = append(out, binary[from:s[0]]...)
		from = s[1]
	}
	return append(out, binary[from:]...)
}
