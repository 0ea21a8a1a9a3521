package guest

// Shape is what the module scanner measured, for the tests.
type Shape struct {
	Functions, MaxBodyBytes, MaxNesting, MaxBlocks   int
	MaxLocals, TableEntries, BlockWork, VariableWork uint64
}

// ScanModule runs the scanner that compile runs before wazero.
func ScanModule(binary []byte) (Shape, error) {
	s, err := scanModule(binary)
	return Shape{Functions: s.functions, MaxBodyBytes: s.maxBodyBytes, MaxNesting: s.maxNesting, MaxBlocks: s.maxBlocks,
		MaxLocals: s.maxLocals, TableEntries: s.tableEntries, BlockWork: s.blockWork, VariableWork: s.variableWork}, err
}
