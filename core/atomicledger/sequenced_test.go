package atomicledger

import (
	"testing"

	"latent.dev/admission/policy"
)

// TestSequencedLedgerOrdersEveryTransaction: on a sequenced ledger every
// transaction runs on the exact path and draws the next order, NextOrder
// draws between them, and the pre-check never answers, not even for a
// reservation that certainly does not fit.
func TestSequencedLedgerOrdersEveryTransaction(t *testing.T) {
	plain := testLedger(t, 1)
	big := Reservation{Tenant: 0, CPUFuel: 1 << 50, MemoryBytes: 1}
	if s, exact := plain.PreCheck(FingerprintOf(0, "x"), &big); !exact || s.Scope == NoScope {
		t.Fatalf("plain pre-check = %+v, %v; want an exact shortfall", s, exact)
	}
	if plain.NextOrder() != 0 {
		t.Fatal("a plain ledger draws orders")
	}
	plain.Update(func(tx Tx) {
		if tx.Order() != 0 {
			t.Error("a plain ledger's transaction has an order")
		}
	})

	l := NewSequenced(policy.MustCompile(testPolicy(t, 1)))
	if s, exact := l.PreCheck(FingerprintOf(0, "x"), &big); exact {
		t.Fatalf("sequenced pre-check answered %+v", s)
	}
	var want uint64
	for i := range 5 {
		want++
		var got uint64
		var exact bool
		l.Update(func(tx Tx) {
			got = tx.Order()
			exact = tx.held().exact
			r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
			fp := FingerprintOf(0, "k")
			if i == 0 && tx.Shortfall(&r).Scope == NoScope {
				tx.Reserve(fp, "k", r)
			}
		})
		if got != want || !exact {
			t.Fatalf("transaction %d: order %d (want %d), exact %v", i, got, want, exact)
		}
		want++
		if n := l.NextOrder(); n != want {
			t.Fatalf("NextOrder = %d, want %d", n, want)
		}
	}
	if live := l.Node().Live; live != 1 {
		t.Fatalf("node live %d, want 1", live)
	}
}
