package guest_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// BenchmarkInvocation is one activation end to end on the runner:
// admission, a cell, the backend's run and the release. The synthetic
// backend is the baseline; the difference is what running a real guest
// costs (instantiation, memory, WASI, _start, close).
//
//	cd edge && go test -run '^$' -bench Invocation -benchtime 2s ./guest
func BenchmarkInvocation(b *testing.B) {
	for _, bc := range []struct {
		name    string
		backend runner.Backend
		route   string
		input   string
	}{
		{"backend=synthetic", synthetic.New(nil), "trap", ""},
		{"backend=wasm/guest=hand-assembled-return", shared.backend, "ret", ""},
		{"backend=wasm/guest=go-uppercase", shared.backend, "upper", "hello, guest"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := newNode(b, guestsDeployment())
			pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": bc.backend}})
			if err != nil {
				b.Fatal(err)
			}
			a := ask{route: bc.route, input: bc.input, fuel: roomyFuel, memory: 32 << 20}
			input := []byte(bc.input)
			b.ReportAllocs()
			for b.Loop() {
				permit, err := n.controller.Admit(n.request(b, "acme", "guests", a))
				if err != nil {
					b.Fatal(err)
				}
				lease, err := pool.Acquire(policy.Small)
				if err != nil {
					b.Fatal(err)
				}
				exec, err := permit.StartExecution()
				if err != nil {
					b.Fatal(err)
				}
				act := r.NewActivation(input)
				grant := exec.Grant()
				act.Run(context.Background(), &grant, lease)
				exec.Release() // the scheduler's, once Run returns
				act.End(nil)
				if rep, _ := act.Wait(context.Background()); rep.Outcome != runner.Succeeded && bc.route != "trap" {
					b.Fatalf("outcome %v", rep.Outcome)
				}
			}
		})
	}
}

// BenchmarkScan is the module scanner that runs before every compile, on
// the repository's Go guest (its cost next to compiling the same module
// is the point: see TestBuildAndCompileTimes), and on a hand-assembled
// module at the block limits.
//
//	cd edge && go test -run '^$' -bench Scan -benchtime 2s ./guest
func BenchmarkScan(b *testing.B) {
	for _, bc := range []struct {
		name   string
		module []byte
	}{
		{"module=go-uppercase", shared.goGuest},
		{"module=blocks-at-the-limit", startBody(repeat(guest.MaxBlocksPerFunction, 0x02, 0x40, 0x0b)...).bytes()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.module)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := guest.ScanModule(bc.module); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCompileAtTheLimits compiles, as Deploy does, the repository's
// Go guest and hand-assembled modules that spend each compile-work
// budget to its limit: what a deploy can cost at worst beyond the
// module's size.
//
//	cd edge && go test -run '^$' -bench CompileAtTheLimits -benchtime 1x ./guest
func BenchmarkCompileAtTheLimits(b *testing.B) {
	blockHeavy := make([][]byte, guest.MaxBlockWork/(guest.MaxBlocksPerFunction*guest.MaxBlocksPerFunction))
	for i := range blockHeavy {
		blockHeavy[i] = body(noLocals, repeat(guest.MaxBlocksPerFunction, 0x02, 0x40, 0x0b)...)
	}
	variableHeavy := make([][]byte, guest.MaxVariableWork/(256*512))
	for i := range variableHeavy {
		variableHeavy[i] = nestedLoops(256, 512)
	}
	// Functions of ifs in a row (each counts twice) and of br_ifs in a
	// row, the costliest shapes measured for the blocks-and-branches
	// budget.
	ifChains := make([][]byte, guest.MaxBlockWork/(guest.MaxBlocksPerFunction*guest.MaxBlocksPerFunction))
	brIfChains := make([][]byte, len(ifChains))
	for i := range ifChains {
		ifChains[i] = body(noLocals, repeat(guest.MaxBlocksPerFunction/2, 0x41, 0x00, 0x04, 0x40, 0x0b)...)
		brIfChains[i] = body(noLocals, concat([]byte{0x02, 0x40}, repeat(guest.MaxBlocksPerFunction-1, 0x41, 0x00, 0x0d, 0x00), []byte{0x0b})...)
	}
	// br_tables at the label limit, as many as the label budget allows.
	var tables []byte
	for range guest.MaxLabelWork / (guest.MaxBrTableLabels * guest.MaxBrTableLabels) {
		tables = concat(tables, []byte{0x41, 0x00, 0x0e}, uleb(guest.MaxBrTableLabels), repeat(guest.MaxBrTableLabels, 0x00), []byte{0x00})
	}
	for _, bc := range []struct {
		name   string
		module []byte
	}{
		{"module=go-uppercase", shared.goGuest},
		{"module=blocks-squared-at-the-limit", guestModule{bodies: blockHeavy}.bytes()},
		{"module=if-chains-squared-at-the-limit", guestModule{bodies: ifChains}.bytes()},
		{"module=br_if-chains-squared-at-the-limit", guestModule{bodies: brIfChains}.bytes()},
		{"module=br_table-labels-squared-at-the-limit", startBody(concat([]byte{0x02, 0x40}, tables, []byte{0x0b})...).bytes()},
		{"module=locals-times-nesting-at-the-limit", guestModule{bodies: variableHeavy}.bytes()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := guest.ScanModule(bc.module); err != nil {
				b.Fatal(err)
			}
			ctx := experimental.WithCompilationWorkers(context.Background(), runtime.GOMAXPROCS(0))
			r := wazero.NewRuntime(ctx)
			defer r.Close(ctx)
			for b.Loop() {
				compiled, err := r.CompileModule(ctx, bc.module)
				if err != nil {
					b.Fatal(err)
				}
				_ = compiled.Close(ctx)
			}
		})
	}
}

// brTableModule is a module whose _start is one br_table of labels
// labels inside depth nested blocks, the labels spread over the blocks.
func brTableModule(labels, depth int) []byte {
	table := concat([]byte{0x41, 0x00, 0x0e}, uleb(uint64(labels)))
	for i := range labels {
		table = append(table, uleb(uint64(i%depth))...)
	}
	table = append(table, 0x00)
	return startBody(concat(repeat(depth, 0x02, 0x40), table, repeat(depth, 0x0b))...).bytes()
}

// BenchmarkCompileBrTable is the compile-time curve of one br_table by
// its labels, into one block and spread over 64 nested ones: wazero's
// compile time grows faster than linearly with them, which
// MaxBrTableLabels bounds.
//
//	cd edge && go test -run '^$' -bench CompileBrTable -benchtime 1x ./guest
func BenchmarkCompileBrTable(b *testing.B) {
	for _, depth := range []int{1, 64} {
		for _, labels := range []int{1_000, 5_000, 10_000, 20_000, 50_000} {
			b.Run(fmt.Sprintf("labels=%d/blocks=%d", labels, depth), func(b *testing.B) {
				module := brTableModule(labels, depth)
				ctx := experimental.WithCompilationWorkers(context.Background(), runtime.GOMAXPROCS(0))
				r := wazero.NewRuntime(ctx)
				defer r.Close(ctx)
				for b.Loop() {
					compiled, err := r.CompileModule(ctx, module)
					if err != nil {
						b.Fatal(err)
					}
					_ = compiled.Close(ctx)
				}
			})
		}
	}
}

// BenchmarkAtTheLimits measures, for a module at each limit that bounds
// an instantiation (and one spending the instance budget across every
// section), what the acceptance asks of each: the deploy's time,
// the heap the compiled module holds while deployed, and twelve
// invocations at once with a 64 KiB grant and 100 ms of wall time (the
// demonstration node's twelve cells): the peak rise of the process's
// resident memory over them (sampled from /proc/self/statm) and the
// slowest one's wall time.
//
//	cd edge && go test -run '^$' -bench AtTheLimits -benchtime 1x ./guest
func BenchmarkAtTheLimits(b *testing.B) {
	for _, c := range atTheLimits() {
		b.Run("limit="+strings.ReplaceAll(c.name, " ", "-"), func(b *testing.B) {
			for b.Loop() {
				d := deployment("acme", "limits", map[string][]byte{"at": c.module})
				backend, _ := ownBackend(b, guest.Config{}, c.module)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				began := time.Now()
				if err := backend.Deploy(context.Background(), d); err != nil {
					b.Fatal(err)
				}
				deployed := time.Since(began)
				runtime.GC()
				runtime.ReadMemStats(&after)
				n := newNodeWith(b, twelveCells(), d)
				pipe, err := pipeline.New(n.provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": backend}})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				baseline := residentBytes(b)
				peak := baseline
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						peak = max(peak, residentBytes(b))
						select {
						case <-stop:
							return
						case <-time.After(200 * time.Microsecond):
						}
					}
				}()
				reports := make([]runner.Report, 12)
				var wg sync.WaitGroup
				for i := range reports {
					req := n.request(b, "acme", "limits", ask{route: "at", fuel: 100_000_000, memory: 64 << 10, wall: 100 * time.Millisecond})
					wg.Go(func() { reports[i], _ = pipe.Invoke(context.Background(), n.controller, req, nil) })
				}
				wg.Wait()
				close(stop)
				<-sampled
				pipe.Drain()
				var slowest time.Duration
				for _, rep := range reports {
					slowest = max(slowest, rep.Consumed.WallTime)
				}
				b.ReportMetric(float64(deployed.Milliseconds()), "deploy-ms")
				b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20), "held-MiB")
				b.ReportMetric(float64(peak-baseline)/(1<<20), "rss-rise-12-MiB")
				b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-ms")
			}
		})
	}
}

// residentBytes is the process's resident memory, from /proc/self/statm.
func residentBytes(b *testing.B) uint64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skipf("no /proc/self/statm: %v", err)
	}
	fields := strings.Fields(string(data))
	pages, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return pages * uint64(os.Getpagesize())
}
