package atomicledger

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"latent.dev/admission/policy"
)

// A snapshot taken while other goroutines reserve, start and release is
// consistent across scopes: the node scope equals the sum of its
// tenants, and the trust class, queue class and cell class agree with it.
// Lock-free reads of the same counters can disagree mid-commit; a
// snapshot never does.
func TestSnapshotIsConsistentAcrossScopes(t *testing.T) {
	l := testLedger(t, 64)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				r := Reservation{Tenant: policy.TenantID(w % 2), CPUFuel: 3, MemoryBytes: 5}
				fp := FingerprintOf(r.Tenant, id)
				var tk Ticket
				reserved := false
				l.Update(func(tx Tx) {
					if tx.Shortfall(&r).Scope != NoScope || tx.Contains(fp, r.Tenant, id) {
						return
					}
					tk, reserved = tx.Reserve(fp, id, r), true
					if i%2 == 0 {
						tx.Start(tk)
					}
				})
				if reserved {
					release(l, tk)
				}
			}
		}()
	}
	var s Snapshot
	for range 5000 {
		l.SnapshotInto(&s)
		a, b := s.Tenants[0], s.Tenants[1]
		sum := Held{Live: a.Live + b.Live, Queued: a.Queued + b.Queued, CPUFuel: a.CPUFuel + b.CPUFuel, MemoryBytes: a.MemoryBytes + b.MemoryBytes}
		if s.Node != sum || s.TrustClass[0] != s.Node || s.QueueQueued[0] != s.Node.Queued || s.CellLive[policy.Tiny] != s.Node.Live ||
			s.Node.CPUFuel != 3*s.Node.Live || s.Node.MemoryBytes != 5*s.Node.Live {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("inconsistent snapshot: %+v", s)
		}
	}
	stop.Store(true)
	wg.Wait()
	l.SnapshotInto(&s)
	if s.Node != (Held{}) {
		t.Errorf("after every release: %+v", s.Node)
	}
	if allocs := testing.AllocsPerRun(100, func() { l.SnapshotInto(&s) }); allocs != 0 {
		t.Errorf("a reused snapshot allocates %v times, want 0", allocs)
	}
}
