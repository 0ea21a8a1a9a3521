package guest_test

// Hand-assembled WebAssembly modules: the binary format written out
// byte by byte, so no external assembler is needed.

// wasmModule is the module header followed by sections.
func wasmModule(sections ...[]byte) []byte {
	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
	for _, s := range sections {
		m = append(m, s...)
	}
	return m
}

// section is one section: id, size, content (sizes below 128 bytes
// only, so one LEB128 byte each).
func section(id byte, content ...byte) []byte {
	if len(content) >= 128 {
		panic("wasm_test: section too large for a one-byte size")
	}
	return append([]byte{id, byte(len(content))}, content...)
}

func name(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

const (
	typeSection     = 1
	importSection   = 2
	functionSection = 3
	memorySection   = 5
	exportSection   = 7
	codeSection     = 10
)

// command is a WASI command whose _start has body (locals and
// instructions, without the final end), with a memory of minPages pages
// exported as "memory".
func command(minPages byte, body ...byte) []byte {
	code := append(append([]byte{0x00}, body...), 0x0b) // no locals, body, end
	return wasmModule(
		section(typeSection, 0x01, 0x60, 0x00, 0x00), // one type: () -> ()
		section(functionSection, 0x01, 0x00),         // one function of type 0
		section(memorySection, 0x01, 0x00, minPages), // one memory, min pages, no max
		section(exportSection, concat([]byte{0x02}, name("_start"), []byte{0x00, 0x00}, name("memory"), []byte{0x02, 0x00})...),
		section(codeSection, concat([]byte{0x01, byte(len(code))}, code)...),
	)
}

var (
	// trapModule's _start executes unreachable.
	trapModule = command(1, 0x00)
	// loopModule's _start spins forever: loop, br 0, end.
	loopModule = command(1, 0x03, 0x40, 0x0c, 0x00, 0x0b)
	// returnModule's _start returns at once.
	returnModule = command(1)
	// bigMemoryModule starts with 100 pages (6.25 MiB) of memory.
	bigMemoryModule = command(100)
	// growModule's _start grows memory by 100 pages and traps if that
	// fails (memory.grow returns -1): i32.const 100, memory.grow 0,
	// i32.const -1, i32.eq, if unreachable end.
	growModule = command(1, 0x41, 0xe4, 0x00, 0x40, 0x00, 0x41, 0x7f, 0x46, 0x04, 0x40, 0x00, 0x0b)
	// noStartModule exports its memory but no _start.
	noStartModule = wasmModule(
		section(memorySection, 0x01, 0x00, 0x01),
		section(exportSection, concat([]byte{0x01}, name("memory"), []byte{0x02, 0x00})...),
	)
	// foreignImportModule is a command that imports env.f, which no WASI
	// runtime provides.
	foreignImportModule = wasmModule(
		section(typeSection, 0x01, 0x60, 0x00, 0x00),
		section(importSection, concat([]byte{0x01}, name("env"), name("f"), []byte{0x00, 0x00})...),
		section(functionSection, 0x01, 0x00),
		section(memorySection, 0x01, 0x00, 0x01),
		section(exportSection, concat([]byte{0x02}, name("_start"), []byte{0x00, 0x01}, name("memory"), []byte{0x02, 0x00})...),
		section(codeSection, 0x01, 0x02, 0x00, 0x0b),
	)
	// corruptModule has the header but a truncated section.
	corruptModule = wasmModule([]byte{typeSection, 0x10, 0x01})
)
