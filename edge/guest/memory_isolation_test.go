package guest_test

import (
	"context"
	"testing"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/runner"
)

// The backend starts a guest's linear memory in an array that an earlier
// guest's memory left behind (run.go, memoryPool), so these guests
// check that no byte of the earlier guest shows.
var (
	// secretModule's _start grows its memory from one page to four and
	// fills all four with the secret byte 0x5a: i32.const 3, memory.grow
	// 0, drop; i32.const 0, i32.const 0x5a, memory.size 0, i32.const 16,
	// i32.shl, memory.fill 0.
	secretModule = guestModule{bodies: [][]byte{body(noLocals,
		0x41, 0x03, 0x40, 0x00, 0x1a,
		0x41, 0x00, 0x41, 0xda, 0x00, 0x3f, 0x00, 0x41, 0x10, 0x74, 0xfc, 0x0b, 0x00)}}.bytes()
	// peekModule's _start grows its memory from one page to four and
	// reads all of it, eight bytes at a time, trapping (unreachable) at
	// the first word that is not zero: i32.const 3, memory.grow 0, drop;
	// loop: local.get 0, i64.load, i64.const 0, i64.ne, if unreachable
	// end; local.get 0, i32.const 8, i32.add, local.tee 0, memory.size 0,
	// i32.const 16, i32.shl, i32.lt_u, br_if 0; end.
	peekModule = guestModule{bodies: [][]byte{body([]byte{0x01, 0x01, 0x7f},
		0x41, 0x03, 0x40, 0x00, 0x1a,
		0x03, 0x40,
		0x20, 0x00, 0x29, 0x03, 0x00, 0x42, 0x00, 0x52, 0x04, 0x40, 0x00, 0x0b,
		0x20, 0x00, 0x41, 0x08, 0x6a, 0x22, 0x00, 0x3f, 0x00, 0x41, 0x10, 0x74, 0x49, 0x0d, 0x00,
		0x0b)}}.bytes()
)

// TestAGuestNeverSeesAnotherGuestsMemory runs, on one cell, a guest that
// writes a secret over all of its memory and then a guest that reads all
// of its own, many times over: every reader finds only zeros, the part
// of the array its initial page covers and the part it grows into alike,
// and at least one reader started in an array a writer had used (else
// the test proved nothing).
func TestAGuestNeverSeesAnotherGuestsMemory(t *testing.T) {
	b, _ := ownBackend(t, guest.Config{}, secretModule, peekModule)
	d := deployment("acme", "guests", map[string][]byte{"secret": secretModule, "peek": peekModule})
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, d)
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": b}})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 32 {
		rep, _, err := n.runDirect(t, r, pool, ask{route: "secret", fuel: roomyFuel, memory: 1 << 20})
		if rep.Outcome != runner.Succeeded {
			t.Fatalf("round %d: the writer ended %v (%v), want success", round, rep.Outcome, err)
		}
		if rep.Consumed.PeakMemoryBytes != 4*65536 {
			t.Fatalf("round %d: the writer's peak memory %d, want four pages", round, rep.Consumed.PeakMemoryBytes)
		}
		rep, _, err = n.runDirect(t, r, pool, ask{route: "peek", fuel: roomyFuel, memory: 1 << 20})
		if rep.Outcome != runner.Succeeded {
			t.Fatalf("round %d: the reader ended %v (%v): it found a byte of the writer's secret", round, rep.Outcome, err)
		}
	}
	if guest.MemoriesReused(b) == 0 {
		t.Fatal("no guest started in an array an earlier guest had used: the test proved nothing")
	}
	t.Logf("%d of 64 memories started in a reused array", guest.MemoriesReused(b))
}
