package atomicledger

import (
	"math/rand/v2"
	"testing"

	"latent.dev/admission/policy"
)

// BenchmarkChooseStripe is what choosing a stripe costs a transaction,
// with the stripe's mutex taken and released as a transaction would, from
// every P at once (run it at -cpu 1,2,...): choice=pool is the ledger's
// way (a sync.Pool, which keeps one stripe per P); choice=random draws a
// stripe per transaction (math/rand/v2's per-thread generator), so a
// stripe's lines move between cores; choice=one is every transaction on
// one stripe, the single mutex of old.
func BenchmarkChooseStripe(b *testing.B) {
	l := newLedger(policy.MustCompile(stripedPolicy()), maxStripes, shardMinimum)
	b.Run("choice=pool", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st := l.tokens.Get().(*stripe)
				st.mu.Lock()
				st.serial++
				st.mu.Unlock()
				l.tokens.Put(st)
			}
		})
	})
	b.Run("choice=random", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st := &l.stripes[rand.N(len(l.stripes))]
				st.mu.Lock()
				st.serial++
				st.mu.Unlock()
			}
		})
	})
	b.Run("choice=one", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st := &l.stripes[0]
				st.mu.Lock()
				st.serial++
				st.mu.Unlock()
			}
		})
	})
}
