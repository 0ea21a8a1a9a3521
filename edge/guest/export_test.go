package guest

// Shape is what the module scanner measured, for the tests.
type Shape struct {
	Functions, MaxBodyBytes, MaxNesting, MaxBlocks, MaxLabels                   int
	Types, Imports, Tables, Globals, Exports, ElementSegments, Data             int
	MaxLocals, TableEntries, ElementEntries, BlockWork, VariableWork, LabelWork uint64
	CustomSections                                                              int
}

// ScanModule runs the scanner that compile runs before wazero.
func ScanModule(binary []byte) (Shape, error) {
	s, err := scanModule(binary)
	return Shape{Functions: s.functions, MaxBodyBytes: s.maxBodyBytes, MaxNesting: s.maxNesting, MaxBlocks: s.maxBlocks,
		MaxLabels: s.maxLabels, Types: s.types, Imports: s.imports, Tables: s.tables, Globals: s.globals, Exports: s.exports,
		ElementSegments: s.elementSegments, Data: s.dataSegments,
		MaxLocals: s.maxLocals, TableEntries: s.tableEntries, ElementEntries: s.elementEntries, BlockWork: s.blockWork,
		VariableWork: s.variableWork, LabelWork: s.labelWork, CustomSections: len(s.customSections)}, err
}

// MemoriesReused is how many guest memories started in an array an
// earlier guest's memory left (memoryPool).
func MemoriesReused(b *Backend) uint64 { return b.memories.reused.Load() }

// ModuleRefs is the references the compiled modules hold in all: one per
// deployed release naming one, one per running guest.
func ModuleRefs(b *Backend) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.modules {
		n += c.refs
	}
	return n
}
