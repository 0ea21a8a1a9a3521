package atomicledger

import (
	"testing"

	"latent.dev/admission/policy"
)

// TenantLiveSince trusts its read only with the pre-check's room intact
// (no write since, none in flight) and the key absent; Tx.TenantLive is the exact count under the mutex.
func TestTenantLiveSince(t *testing.T) {
	l := testLedger(t, 8)
	r := Reservation{Tenant: 1}
	reserve := func(id string) Ticket {
		var tk Ticket
		l.Update(func(tx Tx) { tk = tx.Reserve(FingerprintOf(r.Tenant, id), id, r) })
		return tk
	}
	reserve("x")
	fp := FingerprintOf(r.Tenant, "new")
	s, exact, room := l.PreCheck(fp, &r)
	if s.Scope != NoScope || !exact {
		t.Fatalf("pre-check %+v exact=%v", s, exact)
	}
	if live, ok := l.TenantLiveSince(room, fp, &r); !ok || live != 1 {
		t.Fatalf("intact room: live %d ok %v, want 1 true", live, ok)
	}
	if _, ok := l.TenantLiveSince(Room{}, fp, &r); ok {
		t.Fatal("the zero room was trusted")
	}
	if _, ok := l.TenantLiveSince(room, FingerprintOf(r.Tenant, "x"), &r); ok {
		t.Fatal("a live key was trusted")
	}
	tk := reserve("y")
	if _, ok := l.TenantLiveSince(room, fp, &r); ok {
		t.Fatal("a room taken before a Reserve was trusted")
	}
	_, _, room = l.PreCheck(fp, &r)
	l.Update(func(tx Tx) {
		if !tx.Release(tk) {
			t.Fatal("release")
		}
		if n := tx.TenantLive(r.Tenant); n != 1 {
			t.Fatalf("TenantLive %d, want 1", n)
		}
		if n := tx.TenantLive(policy.TenantID(0)); n != 0 {
			t.Fatalf("the other tenant's TenantLive %d, want 0", n)
		}
	})
	if _, ok := l.TenantLiveSince(room, fp, &r); ok {
		t.Fatal("a room taken before a release was trusted")
	}
	_, _, room = l.PreCheck(fp, &r)
	if live, ok := l.TenantLiveSince(room, fp, &r); !ok || live != 1 {
		t.Fatalf("a room taken after the release: live %d ok %v, want 1 true", live, ok)
	}
	l.seq.Add(1) // a write moving the counters
	if _, ok := l.TenantLiveSince(room, fp, &r); ok {
		t.Fatal("a read while a write moved the counters was trusted")
	}
	l.seq.Add(1)
}
