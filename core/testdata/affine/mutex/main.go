// This program must not compile: an importer can reach the ledger's
// mutex neither through a provider nor through the ledger itself, and a
// locked operation exists only on the Tx that Update hands out.
package main

import (
	"latent.dev/admission/core"
	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

func main() {
	var p *core.LocalQuotaProvider
	p.ledger.Update(func(atomicledger.Tx) {})
	var l *atomicledger.Ledger
	l.Lock()
	l.mu.Lock()
	l.ReserveLocked(0, "id", atomicledger.Reservation{})
	var c *policy.Compiled
	atomicledger.New(c).Unlock()
}
