package guest_test

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
)

var (
	// recursionModule's _start calls itself without end.
	recursionModule = startBody(0x10, 0x00).bytes()
	// wideRecursionModule's _start loads 512 i64 values from memory,
	// calls itself, then adds them up and drops the sum, so each frame
	// holds all of them across the call: frames of 4 KiB and more.
	wideRecursionModule = startBody(concat(repeat(512, 0x41, 0x00, 0x29, 0x03, 0x00), []byte{0x10, 0x00}, repeat(511, 0x7c), []byte{0x1a})...).bytes()
)

// slowNode is a node whose wall-time ceiling leaves deep recursion time
// to reach wazero's stack limit even under the race detector on a loaded
// machine, where copying the doubling stacks can take tens of seconds.
func slowNode(t *testing.T, d catalog.Deployment) (*node, *pipeline.Pipeline, *guest.Backend) {
	t.Helper()
	b, _ := ownBackend(t, guest.Config{}, recursionModule, wideRecursionModule, returnModule)
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	p := nodePolicy()
	p.Node.BudgetCeiling.WallTime = 10 * time.Minute
	n := newNodeWith(t, p, d)
	pipe, err := pipeline.New(n.provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pipe.Drain)
	return n, pipe, b
}

// TestDeepRecursionStackCeiling measures what one guest's unbounded
// recursion allocates on the host: runtime.MemStats.TotalAlloc across
// the invocation, every byte the process allocated meanwhile (stacks,
// dropped ones included, the instance, admission), an upper bound of
// what the stack held at once. It must end as a trap, within
// StackCeilingBytes.
func TestDeepRecursionStackCeiling(t *testing.T) {
	d := deployment("acme", "guests", map[string][]byte{"deep": recursionModule, "wide": wideRecursionModule, "ret": returnModule})
	n, pipe, _ := slowNode(t, d)
	invoke := func(route string) runner.Report {
		rep, _ := pipe.Invoke(context.Background(), n.controller, n.request(t, "acme", "guests", ask{route: route, fuel: roomyFuel, memory: 1 << 20}), nil)
		return rep
	}
	// Warm up the path, so the measure holds the recursion alone.
	if rep := invoke("ret"); rep.Outcome != runner.Succeeded {
		t.Fatalf("ret: %+v", rep)
	}
	for name, route := range map[string]string{"small frames": "deep", "frames of 4 KiB": "wide"} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rep := invoke(route)
			runtime.ReadMemStats(&after)
			if rep.Outcome != runner.Trapped {
				t.Fatalf("deep recursion: %+v, want a trap", rep)
			}
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("one guest's unbounded recursion allocated %d bytes (%.1f MiB) in %v; the ceiling is %d",
				allocated, float64(allocated)/(1<<20), rep.Consumed.WallTime, uint64(guest.StackCeilingBytes))
			if allocated > guest.StackCeilingBytes {
				t.Fatalf("allocated %d bytes, over StackCeilingBytes %d", allocated, uint64(guest.StackCeilingBytes))
			}
		})
	}
}

// TestDeepRecursionOnEveryCellAtOnceLeavesTheNodeServing runs twice as
// many recursing guests as the node's cells, all at once through the
// pipeline: each ends as a trap (HTTP 502), and the node then serves.
func TestDeepRecursionOnEveryCellAtOnceLeavesTheNodeServing(t *testing.T) {
	n, p, _ := slowNode(t, deployment("acme", "guests", map[string][]byte{"deep": recursionModule, "ret": returnModule}))
	var cells uint64
	for _, c := range nodePolicy().CellClasses {
		cells += c.Parallelism
	}
	if err := guest.CheckCallStacks(cells, guest.HostMemoryBytes()); err != nil {
		t.Skipf("this machine cannot hold %d call stacks: %v", cells, err)
	}
	var wg sync.WaitGroup
	reports := make([]runner.Report, 2*cells)
	for i := range reports {
		req := n.request(t, "acme", "guests", ask{route: "deep", fuel: roomyFuel, memory: 1 << 20})
		wg.Go(func() {
			reports[i], _ = p.Invoke(context.Background(), n.controller, req, nil)
		})
	}
	wg.Wait()
	for i, rep := range reports {
		if rep.Outcome != runner.Trapped {
			t.Errorf("guest %d: %+v, want a trap", i, rep)
		}
	}
	rep, err := p.Invoke(context.Background(), n.controller, n.request(t, "acme", "guests", ask{route: "ret", fuel: roomyFuel, memory: 1 << 20}), nil)
	if rep.Outcome != runner.Succeeded {
		t.Fatalf("after the recursions: %+v (%v)", rep, err)
	}
}

func TestCheckCallStacks(t *testing.T) {
	const ceiling = uint64(guest.StackCeilingBytes + guest.InstanceCeilingBytes + guest.RetainedMemoryBytes)
	for _, c := range []struct {
		name             string
		cells, available uint64
		fits             bool
	}{
		{"no cells fit anywhere", 0, 0, true},
		{"memory of exactly cells times the ceiling fits", 12, 12 * ceiling, true},
		{"a byte less does not", 12, 12*ceiling - 1, false},
		{"a cell count whose product overflows does not", math.MaxUint64 / 2, math.MaxUint64, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := guest.CheckCallStacks(c.cells, c.available)
			if fits := err == nil; fits != c.fits || (err != nil && !errors.Is(err, guest.ErrStackMemory)) {
				t.Fatalf("CheckCallStacks(%d, %d) = %v", c.cells, c.available, err)
			}
		})
	}
}
