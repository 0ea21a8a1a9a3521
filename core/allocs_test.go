package core

import (
	"testing"
)

func TestRejectionsAllocateNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts are exact only without -short's parallel noise")
	}
	for _, tc := range decideCases() {
		if tc.want == accepted {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			f, req := tc.prepare(t, "alloc")
			f.clock.set(at(tc.atMs))
			if n := testing.AllocsPerRun(100, func() { _, _ = f.ctl.Admit(req) }); n != 0 {
				t.Fatalf("rejection allocates %v objects", n)
			}
		})
	}
	t.Run("capacity rejection by the pre-check", func(t *testing.T) {
		f := newFixture(t, nil)
		for i := 0; i < 6; i++ { // acme queues at most 6
			admit(t, f, string(rune('a'+i)), 0)
		}
		req := request("full")
		if n := testing.AllocsPerRun(100, func() { _, _ = f.ctl.Admit(req) }); n != 0 {
			t.Fatalf("capacity rejection allocates %v objects", n)
		}
	})
}

func TestCycleAllocations(t *testing.T) {
	f := newFixture(t, nil)
	req := request("cycle")
	var p *AdmissionPermit
	admitAllocs := testing.AllocsPerRun(100, func() {
		var err error
		if p, err = f.ctl.Admit(req); err != nil {
			t.Fatal(err)
		}
		p.Release()
	})
	// The permit is the only allocation; its finalizer costs no heap object.
	if admitAllocs > 1 {
		t.Fatalf("admit allocates %v objects", admitAllocs)
	}
	p, _ = f.ctl.Admit(req)
	var e *ExecutionPermit
	if n := testing.AllocsPerRun(1, func() { e, _ = p.StartExecution() }); n != 0 {
		t.Fatalf("start allocates %v objects", n)
	}
	if n := testing.AllocsPerRun(1, func() { e.Release() }); n != 0 {
		t.Fatalf("release allocates %v objects", n)
	}
	t.Logf("admit allocates %v objects", admitAllocs)
}
