package guest_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/runner"
)

// fc0f is table.grow's encoding (0xFC 15), and fc11 table.fill's (0xFC
// 17): the immediates below are made of them, so a scanner that loses
// its place in the instruction stream sees a table instruction.
var (
	fc0f = []byte{0xfc, 0x0f}
	fc11 = []byte{0xfc, 0x11}
)

// everyImmediate is a stack-neutral run of instructions with every kind
// of immediate the 2.0 instruction set has, each spelled with the bytes
// of table.grow and table.fill where the encoding allows. The function
// holding it declares one i32 local.
var everyImmediate = concat(
	[]byte{0x41}, fc0f, []byte{0x1a}, // i32.const 2044 (LEB128 FC 0F), drop
	[]byte{0x42}, fc11, []byte{0x1a}, // i64.const 2300, drop
	[]byte{0x43}, fc0f, fc11, []byte{0x1a}, // f32.const, drop
	[]byte{0x44}, fc0f, fc11, fc0f, fc11, []byte{0x1a}, // f64.const, drop
	[]byte{0x43}, fc0f, fc11, []byte{0xfc, 0x00, 0x1a}, // f32.const, i32.trunc_sat_f32_s, drop
	[]byte{0x41, 0x00, 0x28, 0x02}, fc0f, []byte{0x1a}, // i32.const 0, i32.load align=2 offset=2044, drop
	[]byte{0x41, 0x00, 0x41, 0x2a, 0x36, 0x02}, fc11, // i32.store align=2 offset=2300
	[]byte{0x02, 0x00, 0x01, 0x0b},                                           // block of type index 0 (s33), nop, end
	[]byte{0x02, 0x40, 0x41, 0x00, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x0b},       // block, i32.const 0, br_table [0 0] 0, end
	[]byte{0x03, 0x40, 0x0b, 0x41, 0x01, 0x04, 0x40, 0x01, 0x05, 0x01, 0x0b}, // loop end, if else end
	[]byte{0x41, 0x01, 0x41, 0x02, 0x41, 0x01, 0x1c, 0x01, 0x7f, 0x1a},       // select (result i32), drop
	[]byte{0x41, 0x05, 0x21, 0x00, 0x20, 0x00, 0x22, 0x00, 0x1a},             // local.set, local.get, local.tee, drop
	[]byte{0x41, 0x00, 0x41, 0x00, 0x41, 0x08, 0xfc, 0x0b, 0x00},             // memory.fill
	[]byte{0x41, 0x00, 0x41, 0x08, 0x41, 0x08, 0xfc, 0x0a, 0x00, 0x00},       // memory.copy
	[]byte{0x3f, 0x00, 0x1a},                                                 // memory.size, drop
	[]byte{0xd0, 0x70, 0xd1, 0x1a},                                           // ref.null func, ref.is_null, drop
	[]byte{0xfd, 0x0c}, repeat(8, fc0f...), []byte{0xfd, 0x15, 0x0f, 0x1a},   // v128.const, i8x16.extract_lane_s 15, drop
	[]byte{0x41, 0x00, 0xfd, 0x00, 0x00}, fc0f, []byte{0x1a}, // v128.load offset=2044, drop
	[]byte{0x41, 0x00, 0xfd, 0x0c}, repeat(8, fc11...), []byte{0xfd, 0x54, 0x00}, fc0f, []byte{0x0f, 0x1a}, // v128.load8_lane offset=2044 lane 15, drop
	[]byte{0x41, 0x00, 0xfd, 0x5c, 0x02}, fc11, []byte{0x1a}, // v128.load32_zero offset=2300, drop
)

// growTable is table.grow on table 0: ref.null func, i32.const 1,
// table.grow 0, drop.
var growTable = []byte{0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, 0x1a}

func TestTheScannerReadsEveryImmediateAsWazeroDoes(t *testing.T) {
	m := guestModule{bodies: [][]byte{body([]byte{0x01, 0x01, 0x7f}, everyImmediate...)}}.bytes()
	if _, err := guest.ScanModule(m); err != nil {
		t.Fatalf("scan: %v", err)
	}
	b, _ := ownBackend(t, guest.Config{}, m)
	d := deployment("acme", "imm", map[string][]byte{"imm": m})
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if rep := runOn(t, b, d, ask{route: "imm", fuel: roomyFuel, memory: 1 << 20}); rep.Outcome != runner.Succeeded {
		t.Fatalf("run: %+v", rep)
	}
}

func TestGoGuestsPassTheModuleLimitsWithRoom(t *testing.T) {
	demo, err := os.ReadFile("../latentd/demo/hello.wasm")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string][]byte{"testdata/guests/uppercase": shared.goGuest, "latentd's demonstration guest": demo} {
		t.Run(name, func(t *testing.T) {
			s, err := guest.ScanModule(m)
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			t.Logf("label work %d", s.LabelWork)
			t.Logf("%d types, %d imports, %d tables, %d globals, %d exports, %d element segments of %d entries, %d data segments, br_table of %d labels, %d custom sections",
				s.Types, s.Imports, s.Tables, s.Globals, s.Exports, s.ElementSegments, s.ElementEntries, s.Data, s.MaxLabels, s.CustomSections)
			t.Logf("%d bytes, %d functions, largest body %d bytes, %d locals, nesting %d, %d blocks in one function, %d table entries, block work %d, variable work %d",
				len(m), s.Functions, s.MaxBodyBytes, s.MaxLocals, s.MaxNesting, s.MaxBlocks, s.TableEntries, s.BlockWork, s.VariableWork)
			// Room: each measure at most half its limit.
			for _, c := range []struct {
				what         string
				measured, at uint64
			}{
				{"bytes", uint64(len(m)), guest.MaxModuleBytes},
				{"functions", uint64(s.Functions), guest.MaxFunctions},
				{"body bytes", uint64(s.MaxBodyBytes), guest.MaxFunctionBytes},
				{"locals", s.MaxLocals, guest.MaxLocals},
				{"nesting", uint64(s.MaxNesting), guest.MaxBlockNesting},
				{"blocks", uint64(s.MaxBlocks), guest.MaxBlocksPerFunction},
				{"table entries", s.TableEntries, guest.MaxTableEntries},
				{"block work", s.BlockWork, guest.MaxBlockWork},
				{"variable work", s.VariableWork, guest.MaxVariableWork},
				{"types", uint64(s.Types), guest.MaxTypes},
				{"imports", uint64(s.Imports), guest.MaxImports},
				{"tables", uint64(s.Tables), guest.MaxTables},
				{"globals", uint64(s.Globals), guest.MaxGlobals},
				{"exports", uint64(s.Exports), guest.MaxExports},
				{"element segments", uint64(s.ElementSegments), guest.MaxElementSegments},
				{"element entries", s.ElementEntries, guest.MaxElementEntries},
				{"data segments", uint64(s.Data), guest.MaxDataSegments},
				{"br_table labels", uint64(s.MaxLabels), guest.MaxBrTableLabels},
			} {
				if 2*c.measured > c.at {
					t.Errorf("%s: %d, more than half the limit %d", c.what, c.measured, c.at)
				}
			}
		})
	}
}

func TestDeployRefusesModulesPastTheLimitsNamingTheLimit(t *testing.T) {
	functions := make([][]byte, guest.MaxFunctions+1)
	for i := range functions {
		functions[i] = body(noLocals)
	}
	// Functions at the per-function limits, one more than the module's
	// budget holds.
	blockHeavy := make([][]byte, guest.MaxBlockWork/(guest.MaxBlocksPerFunction*guest.MaxBlocksPerFunction)+1)
	for i := range blockHeavy {
		blockHeavy[i] = body(noLocals, repeat(guest.MaxBlocksPerFunction, 0x02, 0x40, 0x0b)...)
	}
	variableHeavy := make([][]byte, guest.MaxVariableWork/(256*512)+1)
	for i := range variableHeavy {
		variableHeavy[i] = nestedLoops(256, 512)
	}
	// br_tables at the label limit, one more than the label budget holds.
	var labelHeavy []byte
	for range guest.MaxLabelWork/(guest.MaxBrTableLabels*guest.MaxBrTableLabels) + 1 {
		labelHeavy = concat(labelHeavy, brTable(guest.MaxBrTableLabels))
	}
	tooLarge := concat(returnModule, anySection(0, concat(name("padding"), make([]byte, guest.MaxModuleBytes))))
	for _, tc := range []struct {
		name    string
		module  []byte
		want    error
		mention string // the message names the limit or the rule
	}{
		{name: "a module that can grow a table", want: guest.ErrTableGrowth, mention: "table.grow",
			module: guestModule{tables: oneTable(1), bodies: [][]byte{body(noLocals, growTable...)}}.bytes()},
		{name: "a module that can fill a table", want: guest.ErrTableGrowth, mention: "table.fill",
			module: guestModule{tables: oneTable(1), bodies: [][]byte{body(noLocals, 0x41, 0x00, 0xd0, 0x70, 0x41, 0x01, 0xfc, 0x11, 0x00)}}.bytes()},
		{name: "table.grow after every kind of immediate, in a function never called", want: guest.ErrTableGrowth, mention: "table.grow",
			module: guestModule{tables: oneTable(1), bodies: [][]byte{body(noLocals),
				body([]byte{0x01, 0x01, 0x7f}, concat(everyImmediate, growTable)...)}}.bytes()},
		{name: "a start section", want: guest.ErrStartSection, mention: "start section",
			module: guestModule{start: true, bodies: [][]byte{body(noLocals), body(noLocals, 0x03, 0x40, 0x0c, 0x00, 0x0b)}}.bytes()},
		{name: "blocks nested past the limit", want: guest.ErrBlockNesting, mention: strconv.Itoa(guest.MaxBlockNesting),
			module: startBody(concat(repeat(guest.MaxBlockNesting+1, 0x02, 0x40), repeat(guest.MaxBlockNesting+1, 0x0b))...).bytes()},
		{name: "more blocks in one function than the limit", want: guest.ErrTooManyBlocks, mention: strconv.Itoa(guest.MaxBlocksPerFunction),
			module: startBody(repeat(guest.MaxBlocksPerFunction+1, 0x02, 0x40, 0x0b)...).bytes()},
		{name: "functions whose blocks together pass the compile-work limit", want: guest.ErrBlockWork, mention: strconv.Itoa(guest.MaxBlockWork),
			module: guestModule{bodies: blockHeavy}.bytes()},
		{name: "a function whose locals times nesting pass the compile-work limit", want: guest.ErrVariableWork, mention: strconv.Itoa(guest.MaxFunctionVariableWork),
			module: guestModule{bodies: [][]byte{nestedLoops(257, 512)}}.bytes()},
		{name: "functions whose locals times nesting together pass the compile-work limit", want: guest.ErrVariableWork, mention: strconv.Itoa(guest.MaxVariableWork),
			module: guestModule{bodies: variableHeavy}.bytes()},
		{name: "a br_table past the label limit", want: guest.ErrBrTableTooLarge, mention: strconv.Itoa(guest.MaxBrTableLabels),
			module: startBody(concat([]byte{0x02, 0x40}, brTable(guest.MaxBrTableLabels+1), []byte{0x0b})...).bytes()},
		{name: "br_tables whose labels together pass the compile-work limit", want: guest.ErrLabelWork, mention: strconv.Itoa(guest.MaxLabelWork),
			module: startBody(concat([]byte{0x02, 0x40}, labelHeavy, []byte{0x0b})...).bytes()},
		{name: "branches count as blocks", want: guest.ErrTooManyBlocks, mention: strconv.Itoa(guest.MaxBlocksPerFunction),
			module: startBody(concat([]byte{0x02, 0x40}, repeat(guest.MaxBlocksPerFunction, 0x41, 0x00, 0x0d, 0x00), []byte{0x0b})...).bytes()},
		{name: "elses count as blocks", want: guest.ErrTooManyBlocks, mention: strconv.Itoa(guest.MaxBlocksPerFunction),
			module: startBody(repeat(guest.MaxBlocksPerFunction/2, 0x41, 0x00, 0x04, 0x40, 0x05, 0x0b)...).bytes()},
		{name: "an if counts twice", want: guest.ErrTooManyBlocks, mention: strconv.Itoa(guest.MaxBlocksPerFunction),
			module: startBody(repeat(guest.MaxBlocksPerFunction/2+1, 0x41, 0x00, 0x04, 0x40, 0x0b)...).bytes()},
		{name: "parameters count as locals", want: guest.ErrTooManyLocals, mention: strconv.Itoa(guest.MaxLocals),
			module: guestModule{types: [][]byte{concat([]byte{0x60}, uleb(guest.MaxTypeValues), repeat(guest.MaxTypeValues, 0x7f), []byte{0x00})},
				typeOf: []byte{0x00, 0x01}, bodies: [][]byte{body(noLocals),
					body(concat([]byte{0x01}, uleb(guest.MaxLocals-guest.MaxTypeValues+1), []byte{0x7f}))}}.bytes()},
		{name: "more locals than the limit", want: guest.ErrTooManyLocals, mention: strconv.Itoa(guest.MaxLocals),
			module: guestModule{bodies: [][]byte{body(concat([]byte{0x01}, uleb(guest.MaxLocals+1), []byte{0x7f}))}}.bytes()},
		{name: "local counts that would overflow 32 bits", want: guest.ErrTooManyLocals, mention: strconv.Itoa(guest.MaxLocals),
			module: guestModule{bodies: [][]byte{body(concat([]byte{0x02}, uleb(1<<32-1), []byte{0x7f}, uleb(1<<32-1), []byte{0x7f}))}}.bytes()},
		{name: "a function body past the limit", want: guest.ErrFunctionTooLarge, mention: strconv.Itoa(guest.MaxFunctionBytes),
			module: startBody(repeat(guest.MaxFunctionBytes, 0x01)...).bytes()},
		{name: "more functions than the limit", want: guest.ErrTooManyFunctions, mention: strconv.Itoa(guest.MaxFunctions),
			module: guestModule{bodies: functions}.bytes()},
		{name: "a module past the size limit", want: guest.ErrModuleTooLarge, mention: strconv.Itoa(guest.MaxModuleBytes),
			module: tooLarge},
		{name: "tables that start past the limit", want: guest.ErrTableTooLarge, mention: strconv.Itoa(guest.MaxTableEntries),
			module: guestModule{tables: oneTable(guest.MaxTableEntries + 1), bodies: [][]byte{body(noLocals)}}.bytes()},
		{name: "a table import", want: guest.ErrNotCommand, mention: "not a WASI command",
			module: wasmModule(
				anySection(typeSection, []byte{0x01, 0x60, 0x00, 0x00}),
				anySection(importSection, concat([]byte{0x01}, name("wasi_snapshot_preview1"), name("table"), []byte{0x01, 0x70, 0x00, 0x01})),
				anySection(functionSection, []byte{0x01, 0x00}),
				anySection(memorySection, []byte{0x01, 0x00, 0x01}),
				anySection(exportSection, concat([]byte{0x02}, name("_start"), []byte{0x00, 0x00}, name("memory"), []byte{0x02, 0x00})),
				anySection(codeSection, []byte{0x01, 0x02, 0x00, 0x0b}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := ownBackend(t, guest.Config{}, tc.module)
			err := b.Deploy(context.Background(), deployment("acme", "limits", map[string][]byte{"r": tc.module}))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Deploy: %v, want %v", err, tc.want)
			}
			// Every limit and rule is a refusal latentd can tell from a
			// module that is broken or not a command (see ErrModuleRefused).
			if refused := tc.want != guest.ErrNotCommand; errors.Is(err, guest.ErrModuleRefused) != refused {
				t.Fatalf("Deploy: %v; errors.Is(err, ErrModuleRefused) = %v, want %v", err, !refused, refused)
			}
			var ae *guest.ArtifactError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.mention) || !strings.Contains(err.Error(), guest.DigestOf(tc.module).String()) {
				t.Fatalf("Deploy: %q, want an ArtifactError naming the digest and %q", err, tc.mention)
			}
			if b.Modules() != 0 {
				t.Fatalf("%d modules compiled", b.Modules())
			}
		})
	}
}

func TestModulesAtTheLimitsPassTheScan(t *testing.T) {
	for name, m := range map[string][]byte{
		"blocks nested to the limit":        startBody(concat(repeat(guest.MaxBlockNesting, 0x02, 0x40), repeat(guest.MaxBlockNesting, 0x0b))...).bytes(),
		"as many blocks as the limit":       startBody(repeat(guest.MaxBlocksPerFunction, 0x02, 0x40, 0x0b)...).bytes(),
		"as many locals as the limit":       guestModule{bodies: [][]byte{body(concat([]byte{0x01}, uleb(guest.MaxLocals), []byte{0x7f}))}}.bytes(),
		"locals times nesting at the limit": guestModule{bodies: [][]byte{nestedLoops(256, 512)}}.bytes(),
		"tables that start at the limit":    guestModule{tables: oneTable(guest.MaxTableEntries), bodies: [][]byte{body(noLocals)}}.bytes(),
		"a br_table at the label limit":     startBody(concat([]byte{0x02, 0x40}, brTable(guest.MaxBrTableLabels), []byte{0x0b})...).bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := guest.ScanModule(m); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestTheScannerRefusesWhatItCannotRead(t *testing.T) {
	for name, m := range map[string][]byte{
		"an exception-handling opcode (try)":        startBody(0x06, 0x40, 0x0b).bytes(),
		"a tail call":                               guestModule{bodies: [][]byte{body(noLocals, 0x12, 0x00)}}.bytes(),
		"an unassigned 0xFC opcode":                 startBody(0xfc, 0x12, 0x00).bytes(),
		"an unassigned SIMD opcode":                 startBody(0xfd, 0x9a, 0x01).bytes(),
		"a relaxed-SIMD opcode":                     startBody(0xfd, 0x80, 0x02).bytes(),
		"an i32.const of six LEB128 bytes":          startBody(0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x1a).bytes(),
		"an i32.const with stray high bits":         startBody(0x41, 0xff, 0xff, 0xff, 0xff, 0x4f, 0x1a).bytes(),
		"a local count of six LEB128 bytes":         guestModule{bodies: [][]byte{body([]byte{0x01, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0x7f})}}.bytes(),
		"a body that ends before its end":           wasmModule(anySection(codeSection, []byte{0x01, 0x02, 0x00, 0x01})),
		"bytes after the function's end":            wasmModule(anySection(codeSection, []byte{0x01, 0x03, 0x00, 0x0b, 0x01})),
		"a section longer than the module":          wasmModule([]byte{codeSection, 0x7f, 0x00}),
		"a block type that is a negative index":     startBody(0x02, 0x7a, 0x0b).bytes(),
		"a v128.const cut short":                    startBody(0xfd, 0x0c, 0x00).bytes(),
		"the tags section (exception handling)":     wasmModule(anySection(13, []byte{0x00})),
		"a memory.fill whose immediate is cut off":  wasmModule(anySection(codeSection, []byte{0x01, 0x03, 0x00, 0xfc, 0x0b})),
		"a br_table whose vector runs past the end": startBody(0x41, 0x00, 0x0e, 0xff, 0xff, 0x03, 0x00).bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := guest.ScanModule(m); err == nil {
				t.Fatal("the scanner passed it")
			}
		})
	}
}

// brTable is i32.const 0 and a br_table of labels labels, every one and
// the default to the enclosing block.
func brTable(labels int) []byte {
	return concat([]byte{0x41, 0x00, 0x0e}, uleb(uint64(labels)), repeat(labels, 0x00), []byte{0x00})
}

// TestABrTableAtTheLabelLimitDeploysAndRuns: the limit admits what it
// says, through the compiler.
func TestABrTableAtTheLabelLimitDeploysAndRuns(t *testing.T) {
	m := startBody(concat([]byte{0x02, 0x40}, brTable(guest.MaxBrTableLabels), []byte{0x0b})...).bytes()
	b, _ := ownBackend(t, guest.Config{}, m)
	d := deployment("acme", "labels", map[string][]byte{"labels": m})
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if rep := runOn(t, b, d, ask{route: "labels", fuel: roomyFuel, memory: 1 << 20}); rep.Outcome != runner.Succeeded {
		t.Fatalf("run: %+v", rep)
	}
}
