package atomicledger

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"latent.dev/admission/policy"
)

// limitsPolicy has two tenants, two trust classes and two queue classes,
// with limits small enough that goroutines racing for them reach every
// one.
func limitsPolicy() *policy.NodeAdmissionPolicy {
	node := policy.Limits{MaxLiveActivations: 24, MaxQueuedReservations: 16, MaxReservedCPUFuel: 48, MaxReservedMemoryBytes: 48}
	tenant := policy.Limits{MaxLiveActivations: 16, MaxQueuedReservations: 12, MaxReservedCPUFuel: 34, MaxReservedMemoryBytes: 34}
	trust := tenant
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement: policy.Placement{Architecture: "x", Region: "r", Zone: "z"},
			Backends:  []string{"wasm"}, StateModels: []string{"stateless"},
			BudgetCeiling: policy.NodeBudgetCeiling{CPUFuel: 1, MemoryBytes: 1, WallTime: 1},
			Limits:        node, MaximumPriority: 1, MaximumIdentifierBytes: 64, MaximumGeneratedIdentifierBytes: 96,
			Overload: policy.OverloadPolicy{CPUThreshold: 1, MemoryThreshold: 1, MaximumObservationAge: 1},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "q0", MinPriority: 0, MaxPriority: 0, MaxQueued: 10}, {Name: "q1", MinPriority: 1, MaxPriority: 1, MaxQueued: 8}},
		CellClasses:  []policy.CellClassPolicy{{Class: "tiny", MemoryBytes: 1, Parallelism: 1, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{
			{Name: "t0", CellClasses: []string{"tiny"}, Limits: trust},
			{Name: "t1", CellClasses: []string{"tiny"}, Limits: trust},
		},
		Tenants: []policy.TenantPolicy{
			{ID: "a", TrustClasses: []string{"t0", "t1"}, CellClasses: []string{"tiny"}, MaximumPriority: 1, Limits: tenant},
			{ID: "b", TrustClasses: []string{"t0", "t1"}, CellClasses: []string{"tiny"}, MaximumPriority: 1, Limits: tenant},
		},
	}
}

// commit runs a commit as core's step 13 does (duplicate, capacity, then
// the backlog, refused at or above backlogLimit) in one transaction.
func commit(l *Ledger, id string, r Reservation, backlogLimit uint64) (tk Ticket, answer string) {
	fp := FingerprintOf(r.Tenant, id)
	l.Update(func(tx Tx) {
		tk = Ticket{}
		if tx.Contains(fp, r.Tenant, id) {
			answer = "duplicate"
			return
		}
		if s := tx.Shortfall(&r); s.Scope != NoScope {
			answer = fmt.Sprintf("short %d/%d", s.Scope, s.Dimension)
			return
		}
		if tx.CellBacklog(r.CellClass) >= backlogLimit {
			answer = "infeasible"
			return
		}
		tk, answer = tx.Reserve(fp, id, r), "ok"
	})
	return tk, answer
}

// checkWithinLimits takes a snapshot and fails if any scope is over any
// limit, or the scopes disagree with each other.
func checkWithinLimits(l *Ledger, s *Snapshot) error {
	l.SnapshotInto(s)
	over := func(name string, u Held, lim policy.Limits) error {
		if u.Live > lim.MaxLiveActivations || u.Queued > lim.MaxQueuedReservations ||
			u.CPUFuel > lim.MaxReservedCPUFuel || u.MemoryBytes > lim.MaxReservedMemoryBytes {
			return fmt.Errorf("%s over its limits %+v: %+v", name, lim, u)
		}
		return nil
	}
	if err := over("node", s.Node, l.node.limit); err != nil {
		return err
	}
	add := func(a, b Held) Held {
		return Held{a.Live + b.Live, a.Queued + b.Queued, a.CPUFuel + b.CPUFuel, a.MemoryBytes + b.MemoryBytes}
	}
	var tenants, trust Held
	for i, u := range s.Tenants {
		if err := over(fmt.Sprint("tenant ", i), u, l.tenant[i].limit); err != nil {
			return err
		}
		tenants = add(tenants, u)
	}
	for i, u := range s.TrustClass {
		if err := over(fmt.Sprint("trust class ", i), u, l.trust[i].limit); err != nil {
			return err
		}
		trust = add(trust, u)
	}
	var queued uint64
	for i, q := range s.QueueQueued {
		if q > l.queue[i].limit.MaxQueuedReservations {
			return fmt.Errorf("queue class %d over its limit: %d", i, q)
		}
		queued += q
	}
	if tenants != s.Node || trust != s.Node || queued != s.Node.Queued || s.CellLive[0] != s.Node.Live {
		return fmt.Errorf("scopes disagree: %+v", s)
	}
	return nil
}

// Goroutines racing for every limit at once never take a scope past one,
// the scopes always agree, every scope and dimension refuses someone, and
// everything comes back.
func TestEveryLimitFromManyGoroutines(t *testing.T) {
	const workers, steps = 4, 3000
	l := New(policy.MustCompile(limitsPolicy()))
	var mu sync.Mutex
	refusals := map[string]int{}
	wanted := []string{
		"short 1/0", "short 1/1", "short 1/2", "short 1/3",
		"short 2/0", "short 2/1", "short 2/2", "short 2/3",
		"short 3/0", "short 3/1", "short 3/2", "short 3/3",
		"short 4/1",
	}
	covered := func() bool {
		for _, want := range wanted {
			if refusals[want] == 0 {
				return false
			}
		}
		return true
	}
	// Rounds until every scope and dimension has refused someone (the
	// schedule is the machine's, so one round may miss one).
	for round := 0; round < 8 && !covered(); round++ {
		runLimitsRound(t, l, workers, steps, uint64(round), refusals, &mu)
	}
	var s Snapshot
	l.SnapshotInto(&s)
	if s.Node != (Held{}) || l.LiveEntries() != 0 {
		t.Fatalf("after every release: %+v, %d entries", s.Node, l.LiveEntries())
	}
	for _, want := range wanted {
		if refusals[want] == 0 {
			t.Errorf("no refusal %q: %v", want, refusals)
		}
	}
	t.Logf("refusals: %v", refusals)
}

// runLimitsRound is one round of TestEveryLimitFromManyGoroutines:
// workers goroutines, steps steps each; every reservation is released by
// the end.
func runLimitsRound(t *testing.T, l *Ledger, workers, steps int, round uint64, refusals map[string]int, mu *sync.Mutex) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), round))
			var held []Ticket
			var s Snapshot
			seen := map[string]int{}
			for i := range steps {
				// Phases of light, fuel-heavy and memory-heavy
				// reservations, and one that starts more, so that each
				// dimension is the one to run out at times; each worker
				// leans to one tenant and trust class.
				phase := (i / 250) % 4
				fuel, memory, starts := 1+rng.Uint64N(2), 1+rng.Uint64N(2), 8
				switch phase {
				case 1:
					fuel = 3 + rng.Uint64N(3)
				case 2:
					memory = 3 + rng.Uint64N(3)
				case 3:
					starts = 5
				}
				tenant, trust := w%2, w/2%2
				if rng.IntN(4) == 0 {
					tenant, trust = rng.IntN(2), rng.IntN(2)
				}
				switch op := rng.IntN(10); {
				case op < starts-2 || len(held) == 0:
					r := Reservation{Tenant: policy.TenantID(tenant), TrustClass: policy.TrustClassID(trust),
						QueueClass: policy.QueueClassID(rng.IntN(2)), CPUFuel: fuel, MemoryBytes: memory}
					id := fmt.Sprintf("w%d-%d-%d", w, round, i)
					// The pre-check's exact answer is a refusal the
					// transaction would have given then; it is counted
					// like one.
					if short, exact, _ := l.PreCheck(FingerprintOf(r.Tenant, id), &r); exact && short.Scope != NoScope {
						seen[fmt.Sprintf("short %d/%d", short.Scope, short.Dimension)]++
						break
					}
					tk, answer := commit(l, id, r, ^uint64(0))
					if answer == "ok" {
						held = append(held, tk)
					} else {
						seen[answer]++
					}
				case op < starts:
					j := rng.IntN(len(held))
					l.Update(func(tx Tx) { tx.Start(held[j]) })
				default:
					j := rng.IntN(len(held))
					l.Update(func(tx Tx) {
						if !tx.Release(held[j]) {
							errs <- fmt.Errorf("worker %d: a live ticket did not release", w)
						}
					})
					held = append(held[:j], held[j+1:]...)
				}
				if err := checkWithinLimits(l, &s); err != nil {
					errs <- fmt.Errorf("worker %d step %d: %v", w, i, err)
					return
				}
			}
			for _, tk := range held {
				release(l, tk)
			}
			mu.Lock()
			for k, n := range seen {
				refusals[k] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// Every transaction takes the next place in the total order, and so does
// NextOrder, between them: orders are dense and strictly increasing, in
// the order the transactions ran.
func TestEveryTransactionTakesTheNextOrder(t *testing.T) {
	l := testLedger(t, 1)
	var want uint64
	for i := range 5 {
		want++
		var got, again uint64
		l.Update(func(tx Tx) {
			got = tx.Order()
			r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
			if i == 0 && tx.Shortfall(&r).Scope == NoScope {
				tx.Reserve(FingerprintOf(0, "k"), "k", r)
			}
			again = tx.Order()
		})
		if got != want || again != want {
			t.Fatalf("transaction %d: order %d then %d, want %d", i, got, again, want)
		}
		want++
		if n := l.NextOrder(); n != want {
			t.Fatalf("NextOrder = %d, want %d", n, want)
		}
	}
	// From many goroutines at once, no order is handed out twice and
	// none is skipped.
	const goroutines, each = 4, 500
	seen := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if i%2 == 0 {
					seen[g] = append(seen[g], l.NextOrder())
				} else {
					l.Update(func(tx Tx) { seen[g] = append(seen[g], tx.Order()) })
				}
			}
		}()
	}
	wg.Wait()
	got := map[uint64]bool{}
	for _, orders := range seen {
		for i, o := range orders {
			if got[o] || (i > 0 && o <= orders[i-1]) {
				t.Fatalf("order %d handed out twice or out of turn", o)
			}
			got[o] = true
		}
	}
	for o := want + 1; o <= want+goroutines*each; o++ {
		if !got[o] {
			t.Fatalf("order %d was skipped", o)
		}
	}
}

// TestReservedCountsEveryReservationOnce: Reserved is what core reports
// as admitted; it counts reservations, and a release, a start or a
// refused commit leaves it as it was.
func TestReservedCountsEveryReservationOnce(t *testing.T) {
	l := New(policy.MustCompile(limitsPolicy()))
	if n := l.Reserved(); n != 0 {
		t.Fatalf("a new ledger has Reserved %d", n)
	}
	r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
	var tickets []Ticket
	for i := range 3 {
		tk, answer := commit(l, fmt.Sprintf("a%d", i), r, 100)
		if answer != "ok" {
			t.Fatalf("commit %d: %s", i, answer)
		}
		tickets = append(tickets, tk)
		if n := l.Reserved(); n != uint64(i+1) {
			t.Fatalf("after %d reservations Reserved is %d", i+1, n)
		}
	}
	if _, answer := commit(l, "a0", r, 100); answer != "duplicate" {
		t.Fatalf("the duplicate: %s", answer)
	}
	l.Update(func(tx Tx) { tx.Start(tickets[0]); tx.Release(tickets[1]) })
	if n := l.Reserved(); n != 3 {
		t.Fatalf("after a refused commit, a start and a release Reserved is %d, want 3", n)
	}
}
