package guest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// limitParts is a WASI command assembled from sections that may be
// large: type 0 is () -> (), the imports are functions, the module
// defines one function (_start, of type 0, an empty body) and one page
// of memory, and exports both.
type limitParts struct {
	types     [][]byte // function types after type 0, each 0x60 ...
	imports   [][]byte // function imports, each complete
	tables    [][]byte // each a reference type and limits
	globals   [][]byte // each a value type, mutability and initializer
	exports   [][]byte // exports after _start and memory, each complete
	elements  [][]byte // element segments, each complete
	data      [][]byte // data segments, each complete
	dataCount bool     // a data count section
	body      []byte   // _start's instructions; nil for none
}

func (p limitParts) bytes() []byte {
	sections := [][]byte{anySection(typeSection, vector(append([][]byte{{0x60, 0x00, 0x00}}, p.types...)...))}
	if p.imports != nil {
		sections = append(sections, anySection(importSection, vector(p.imports...)))
	}
	start := uleb(uint64(len(p.imports))) // _start's index: after the imports
	sections = append(sections, anySection(functionSection, []byte{0x01, 0x00}))
	if p.tables != nil {
		sections = append(sections, anySection(4, vector(p.tables...)))
	}
	sections = append(sections, anySection(memorySection, []byte{0x01, 0x00, 0x01}))
	if p.globals != nil {
		sections = append(sections, anySection(6, vector(p.globals...)))
	}
	exports := append([][]byte{concat(name("_start"), []byte{0x00}, start), concat(name("memory"), []byte{0x02, 0x00})}, p.exports...)
	sections = append(sections, anySection(exportSection, vector(exports...)))
	if p.elements != nil {
		sections = append(sections, anySection(9, vector(p.elements...)))
	}
	if p.dataCount {
		sections = append(sections, anySection(12, uleb(uint64(len(p.data)))))
	}
	sections = append(sections, anySection(codeSection, vector(body(noLocals, p.body...))))
	if p.data != nil {
		sections = append(sections, anySection(11, vector(p.data...)))
	}
	return wasmModule(sections...)
}

// longName is a name of n bytes, distinct for each i.
func longName(i, n int) []byte {
	s := fmt.Sprintf("e%d", i)
	for len(s) < n {
		s += "_"
	}
	return concat(uleb(uint64(len(s))), []byte(s))
}

// times is n items made by item.
func times(n int, item func(i int) []byte) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = item(i)
	}
	return out
}

// refFuncs is a vector of n function indices, all function's.
func refFuncs(n int, function uint64) []byte {
	return concat(uleb(uint64(n)), repeat(n, uleb(function)...))
}

// atTheLimits is, for each of the module limits that bound what an
// instantiation allocates, a module with that count at its limit and
// nothing else large: what a deploy and an invocation cost at worst per
// limit (see TestEachLimitsCostAtTheLimit and BenchmarkAtTheLimits).
func atTheLimits() []struct {
	name   string
	module []byte
} {
	fdWrite := concat(name("wasi_snapshot_preview1"), name("fd_write"), []byte{0x00, 0x01})
	fdWriteType := []byte{0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f}
	perSegment := guest.MaxElementEntries / guest.MaxElementSegments
	types := times(guest.MaxTypes-2, func(i int) []byte {
		// Distinct types: i's bits as i32 and i64 parameters, and one
		// type with as many values as a type may have.
		if i == 0 {
			return concat([]byte{0x60}, uleb(guest.MaxTypeValues-1), repeat(guest.MaxTypeValues-1, 0x7f), []byte{0x01, 0x7e})
		}
		params := []byte{}
		for v := i; v > 0; v >>= 1 {
			params = append(params, 0x7f-byte(v&1))
		}
		return concat([]byte{0x60}, uleb(uint64(len(params))), params, []byte{0x00})
	})
	imports := times(guest.MaxImports, func(int) []byte { return fdWrite })
	tables := times(guest.MaxTables, func(int) []byte {
		return concat([]byte{0x70, 0x00}, uleb(guest.MaxTableEntries/guest.MaxTables))
	})
	globals := times(guest.MaxGlobals, func(int) []byte { return []byte{0x7e, 0x01, 0x42, 0x00, 0x0b} })
	exports := times(guest.MaxExports-2, func(i int) []byte { return concat(longName(i, 8), []byte{0x00, 0x00}) })
	segments := times(guest.MaxElementSegments, func(int) []byte {
		return concat([]byte{0x01, 0x00}, refFuncs(perSegment, 0)) // passive funcref
	})
	data := times(guest.MaxDataSegments, func(i int) []byte {
		if i%2 == 0 {
			return []byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0x2a} // active, one byte at 0
		}
		return []byte{0x01, 0x01, 0x2a} // passive, one byte
	})
	return []struct {
		name   string
		module []byte
	}{
		{"the instance budget spent across every section", spentAcrossEverySection(guest.MaxInstanceBytes, fdWrite, fdWriteType)},
		{"types", limitParts{types: types}.bytes()},
		{"imports", limitParts{types: [][]byte{fdWriteType}, imports: imports}.bytes()},
		{"tables", limitParts{tables: tables}.bytes()},
		{"globals", limitParts{globals: globals}.bytes()},
		{"exports", limitParts{exports: exports}.bytes()},
		{"element segments", limitParts{elements: segments}.bytes()},
		{"element entries, passive", limitParts{elements: [][]byte{concat([]byte{0x01, 0x00}, refFuncs(guest.MaxElementEntries, 0))}}.bytes()},
		{"element entries, active", limitParts{tables: [][]byte{concat([]byte{0x70, 0x00}, uleb(guest.MaxElementEntries))},
			elements: [][]byte{concat([]byte{0x00, 0x41, 0x00, 0x0b}, refFuncs(guest.MaxElementEntries, 0))}}.bytes()},
		{"data segments", limitParts{dataCount: true, data: data}.bytes()},
		{"module size", limitParts{dataCount: true, data: [][]byte{
			// One passive segment of the rest of the bytes the size limit allows.
			concat([]byte{0x01}, uleb(guest.MaxModuleBytes-256), make([]byte, guest.MaxModuleBytes-256)),
		}}.bytes()},
		{"functions", guestModule{bodies: times(guest.MaxFunctions, func(int) []byte { return body(noLocals) })}.bytes()},
	}
}

// TestEachLimitsCostAtTheLimit deploys, for each limit that bounds an
// instantiation, a module at that limit, and measures one invocation's
// host allocations (runtime.MemStats.TotalAlloc across it: every byte the
// process allocated meanwhile, the instance, its tables, globals and
// element references, WASI and admission) against InstanceCeilingBytes;
// then runs twelve at once under the grant of the reproduction (a
// page of memory, 1 ms of fuel, 100 ms of wall time), each of which must
// end, its instantiation counted in its fuel and deadline.
func TestEachLimitsCostAtTheLimit(t *testing.T) {
	for _, c := range atTheLimits() {
		t.Run(c.name, func(t *testing.T) {
			d := deployment("acme", "limits", map[string][]byte{"at": c.module, "ret": returnModule})
			b, _ := ownBackend(t, guest.Config{}, c.module, returnModule)
			began := time.Now()
			if err := b.Deploy(context.Background(), d); err != nil {
				t.Fatalf("Deploy: %v", err)
			}
			deployed := time.Since(began)
			n := newNodeWith(t, twelveCells(), d)
			pipe, err := pipeline.New(n.provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": b}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pipe.Drain)
			invoke := func(a ask) runner.Report {
				rep, _ := pipe.Invoke(context.Background(), n.controller, n.request(t, "acme", "limits", a), nil)
				return rep
			}
			roomy := ask{route: "at", fuel: roomyFuel, memory: 64 << 10}
			if rep := invoke(roomy); rep.Outcome != runner.Succeeded {
				t.Fatalf("first run: %+v", rep)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rep := invoke(roomy)
			runtime.ReadMemStats(&after)
			if rep.Outcome != runner.Succeeded {
				t.Fatalf("run: %+v", rep)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			reports := make([]runner.Report, 12)
			errs := make([]error, 12)
			var wg sync.WaitGroup
			for i := range reports {
				req := n.request(t, "acme", "limits", ask{route: "at", fuel: 1_000_000, memory: 64 << 10, wall: 100 * time.Millisecond})
				wg.Go(func() { reports[i], errs[i] = pipe.Invoke(context.Background(), n.controller, req, nil) })
			}
			wg.Wait()
			var slowest time.Duration
			for i, rep := range reports {
				switch {
				case rep.Outcome == runner.Succeeded, rep.Outcome == runner.FuelExhausted, rep.Outcome == runner.DeadlineExceeded:
				case errors.Is(errs[i], scheduler.ErrExpired):
					// On a loaded machine its deadline passed while it waited for a
					// cell: it ended by its deadline too.
				case refusedForQueueDelay(errs[i]):
					// On a loaded machine the cells' queue delay made its
					// deadline infeasible, and admission refused it before it
					// ran: it cost nothing.
				default:
					t.Errorf("one of twelve at once: %+v (%v)", rep, errs[i])
				}
				slowest = max(slowest, rep.Consumed.WallTime)
			}
			t.Logf("%d bytes: deploy %v; one invocation allocated %.1f MiB in %v; twelve at once: slowest %v (%v)",
				len(c.module), deployed.Round(time.Millisecond), float64(allocated)/(1<<20), rep.Consumed.WallTime, slowest, reports[0].Outcome)
			if allocated > guest.InstanceCeilingBytes {
				t.Errorf("one invocation allocated %d bytes, over InstanceCeilingBytes %d", allocated, uint64(guest.InstanceCeilingBytes))
			}
		})
	}
}

// twelveCells is nodePolicy with cells and limits that let twelve
// guests (the demonstration node's cells) run at once.
func twelveCells() *policy.NodeAdmissionPolicy {
	p := nodePolicy()
	limits := policy.Limits{MaxLiveActivations: 24, MaxQueuedReservations: 24, MaxReservedCPUFuel: 1 << 50, MaxReservedMemoryBytes: 1 << 32}
	p.Node.Limits = limits
	p.CellClasses[0].Parallelism = 24 // a released cell may take a moment to come back
	p.QueueClasses[0].MaxQueued = 24
	p.TrustClasses[0].Limits = limits
	p.Tenants[0].Limits = limits
	return p
}

// spentAcrossEverySection is a module whose estimated instantiation
// spends about budget bytes in even parts on tables, globals, element
// entries, data segments and imports (the estimate's per-item figures are
// the scanner's: see instanceBytes in limits.go).
func spentAcrossEverySection(budget int, fdWrite, fdWriteType []byte) []byte {
	part := budget / 5
	imports := min(guest.MaxImports, part/128)
	part += (part - imports*128) / 4 // what the imports leave, to the others
	globals := min(guest.MaxGlobals, part/128)
	segments := min(guest.MaxElementEntries, part/96) / 64 // of 64 entries each
	data := min(guest.MaxDataSegments, part/32)
	return limitParts{
		types:   [][]byte{fdWriteType},
		imports: times(imports, func(int) []byte { return fdWrite }),
		tables:  [][]byte{concat([]byte{0x70, 0x00}, uleb(uint64(part/8)))},
		globals: times(globals, func(int) []byte { return []byte{0x7e, 0x01, 0x42, 0x00, 0x0b} }),
		elements: times(segments, func(int) []byte {
			return concat([]byte{0x01, 0x00}, refFuncs(64, uint64(imports))) // passive funcref of _start
		}),
		dataCount: true,
		data:      times(data, func(int) []byte { return []byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0x2a} }),
	}.bytes()
}

// refusedForQueueDelay reports whether err is admission's refusal of a
// deadline the cells' queue delay made infeasible.
func refusedForQueueDelay(err error) bool {
	var ce core.Error
	return errors.As(err, &ce) && ce.Reason() == core.ReasonQueueDeadlineInfeasible
}
