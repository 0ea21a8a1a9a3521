package atomicledger

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// stripedPolicy has two tenants, two trust classes and two queue
// classes, with limits that a few goroutines reach in every dimension at
// once: the node's are below the sum of two tenants' or two trust
// classes', so that each scope is the first without room at times.
func stripedPolicy() *policy.NodeAdmissionPolicy {
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

// shardings are the layouts the striped tests run under: every scope
// sharded, none, and a mix (the node, trust class and tenants' larger
// dimensions sharded; the queue classes and the smaller dimensions not).
var shardings = []struct {
	name    string
	minimum uint64
}{{"all sharded", 1}, {"mixed", 4}, {"none sharded", 1 << 40}}

// limitOf is the limit of scope id in dimension d.
func (l *Ledger) limitOf(id int, d int) uint64 { return l.scopes[id].limit[d] }

// checkWithinLimits takes a snapshot and fails if any scope is over any
// limit, or the scopes disagree with each other.
func checkWithinLimits(l *Ledger, s *Snapshot) error {
	l.SnapshotInto(s)
	over := func(name string, u Held, id int) error {
		for d, v := range [...]uint64{u.Live, u.Queued, u.CPUFuel, u.MemoryBytes} {
			if v > l.limitOf(id, d) {
				return fmt.Errorf("%s over its limit in dimension %d: %+v", name, d, u)
			}
		}
		return nil
	}
	if err := over("node", s.Node, 0); err != nil {
		return err
	}
	add := func(a, b Held) Held {
		return Held{a.Live + b.Live, a.Queued + b.Queued, a.CPUFuel + b.CPUFuel, a.MemoryBytes + b.MemoryBytes}
	}
	var tenants, trust Held
	for i, u := range s.Tenants {
		if err := over(fmt.Sprint("tenant ", i), u, l.tenantBase+i); err != nil {
			return err
		}
		tenants = add(tenants, u)
	}
	for i, u := range s.TrustClass {
		if err := over(fmt.Sprint("trust class ", i), u, l.trustBase+i); err != nil {
			return err
		}
		trust = add(trust, u)
	}
	var queued uint64
	for i, q := range s.QueueQueued {
		if q > l.limitOf(l.queueBase+i, int(QueuedReservations)) {
			return fmt.Errorf("queue class %d over its limit: %d", i, q)
		}
		queued += q
	}
	if tenants != s.Node || trust != s.Node || queued != s.Node.Queued || s.CellLive[0] != s.Node.Live {
		return fmt.Errorf("scopes disagree: %+v", s)
	}
	return nil
}

// commitOn runs a commit as core's step 13 does (duplicate, capacity,
// then the backlog, refused at or above backlogLimit) on stripe st.
func commitOn(l *Ledger, st *stripe, id string, r Reservation, backlogLimit uint64) (tk Ticket, answer string) {
	fp := FingerprintOf(r.Tenant, id)
	l.updateOn(st, func(tx Tx) {
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

// Goroutines on different stripes admit, start and release at random
// until every scope and dimension has refused someone; after every step
// each checks that no scope is over any limit and that the scopes agree.
func TestEveryLimitAtOnceAcrossStripes(t *testing.T) {
	const workers, steps = 4, 3000
	for _, sh := range shardings {
		t.Run(sh.name, func(t *testing.T) {
			l := newLedger(policy.MustCompile(stripedPolicy()), workers, sh.minimum)
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
			// Rounds until every scope and dimension has refused someone
			// (the schedule is the machine's, so one round may miss one).
			for round := 0; round < 8 && !covered(); round++ {
				runStripedRound(t, l, workers, steps, uint64(round), refusals, &mu)
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
		})
	}
}

// runStripedRound is one round of TestEveryLimitAtOnceAcrossStripes:
// workers goroutines, each on its own stripe, steps steps each; every
// reservation is released by the end.
func runStripedRound(t *testing.T, l *Ledger, workers, steps int, round uint64, refusals map[string]int, mu *sync.Mutex) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), round))
			st := &l.stripes[w]
			var held []Ticket
			var s Snapshot
			seen := map[string]int{}
			for i := range steps {
				// Phases of light, fuel-heavy and memory-heavy
				// reservations, and one that starts more, so that
				// each dimension is the one to run out at times;
				// each worker leans to one tenant and trust class.
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
					tk, answer := commitOn(l, st, fmt.Sprintf("w%d-%d-%d", w, round, i), r, ^uint64(0))
					if answer == "ok" {
						held = append(held, tk)
					} else {
						seen[answer]++
					}
				case op < starts:
					j := rng.IntN(len(held))
					l.updateOn(st, func(tx Tx) { tx.Start(held[j]) })
				default:
					j := rng.IntN(len(held))
					// Release on another stripe now and then, so that
					// rooms move between stripes.
					other := &l.stripes[(w+rng.IntN(2))%workers]
					l.updateOn(other, func(tx Tx) {
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

// Capacity parked in one stripe's room is counted before anyone is
// refused: with the node's last free slots sitting in stripe 0's room,
// requests on stripe 1, whose room and the pool are empty, are admitted
// until the true total is at the limit, and only then refused.
func TestParkedRoomIsCounted(t *testing.T) {
	p := stripedPolicy()
	big := policy.Limits{MaxLiveActivations: 64, MaxQueuedReservations: 64, MaxReservedCPUFuel: 1 << 20, MaxReservedMemoryBytes: 1 << 20}
	p.Node.Limits = policy.Limits{MaxLiveActivations: 16, MaxQueuedReservations: 16, MaxReservedCPUFuel: 1 << 20, MaxReservedMemoryBytes: 1 << 20}
	p.TrustClasses[0].Limits, p.Tenants[0].Limits = big, big
	p.QueueClasses[0].MaxQueued = 64
	l := newLedger(policy.MustCompile(p), 2, 1)
	if !l.scopes[0].sharded || l.scopes[0].batch[LiveActivations] != 2 {
		t.Fatalf("the node is not sharded with batches of 2: %v %v", l.scopes[0].sharded, l.scopes[0].batch)
	}
	a, b := &l.stripes[0], &l.stripes[1]
	r := Reservation{CPUFuel: 1, MemoryBytes: 1}
	// Stripe 0 admits and releases one: its room holds its 2 slots.
	tk, answer := commitOn(l, a, "a0", r, ^uint64(0))
	var released bool
	l.updateOn(a, func(tx Tx) { released = tx.Release(tk) })
	if answer != "ok" || !released {
		t.Fatalf("stripe 0: %s, released %v", answer, released)
	}
	admitted := 0
	for i := 0; ; i++ {
		if i == 14 {
			// Stripe 1 has drawn its room and the whole pool: the 2 free
			// slots left are parked in stripe 0's room.
			pool := l.scopes[0].count[LiveActivations].Load()
			if a.room[0][LiveActivations] != 2 || b.room[0][LiveActivations] != 0 || pool != 0 {
				t.Fatalf("before the 15th: rooms %d and %d, pool %d", a.room[0][LiveActivations], b.room[0][LiveActivations], pool)
			}
		}
		_, answer := commitOn(l, b, fmt.Sprint("b", i), r, ^uint64(0))
		if answer != "ok" {
			if answer != fmt.Sprintf("short %d/%d", NodeScope, LiveActivations) {
				t.Fatalf("refused with %s", answer)
			}
			break
		}
		admitted++
	}
	if admitted != 16 {
		t.Fatalf("stripe 1 admitted %d, want the node's whole 16", admitted)
	}
	if got := l.Node().Live; got != 16 {
		t.Fatalf("node live %d", got)
	}
}

// A fast commit's backlog is an upper bound: it counts another stripe's
// raise that may yet be given back. A refusal by the bound is not an
// answer: the commit runs again on the exact path, which waits for the
// other stripe and counts only what is live.
func TestABacklogBoundNeverRefuses(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	r := Reservation{CPUFuel: 1, MemoryBytes: 1}
	if _, answer := commitOn(l, &l.stripes[0], "live", r, ^uint64(0)); answer != "ok" {
		t.Fatal(answer)
	}
	raised, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		first := true
		l.updateOn(&l.stripes[0], func(tx Tx) {
			tx.CellBacklog(0)
			if first {
				first = false
				close(raised)
				<-resume
			}
		})
	}()
	<-raised
	answered := make(chan string)
	go func() {
		// The exact backlog is 1; the bound is 2, which a limit of 2
		// would refuse.
		_, answer := commitOn(l, &l.stripes[1], "next", r, 2)
		answered <- answer
	}()
	select {
	case answer := <-answered:
		t.Fatalf("answered %q while another stripe's raise was in flight", answer)
	case <-time.After(50 * time.Millisecond):
	}
	close(resume)
	if answer := <-answered; answer != "ok" {
		t.Fatalf("refused with %q: the bound was taken for the backlog", answer)
	}
	<-done
	if n := l.CellClassLive(0); n != 2 {
		t.Fatalf("backlog %d, want 2", n)
	}
}

// The pre-check answers at an unsharded scope, but not at a sharded one
// whose pool is short: the room parked in stripes is the exact path's to
// count.
func TestPreCheckDefersAtAShardedScope(t *testing.T) {
	p := stripedPolicy()
	p.Tenants[1].Limits = policy.Limits{MaxLiveActivations: 1, MaxQueuedReservations: 1, MaxReservedCPUFuel: 100, MaxReservedMemoryBytes: 100}
	big := policy.Limits{MaxLiveActivations: 64, MaxQueuedReservations: 64, MaxReservedCPUFuel: 1 << 20, MaxReservedMemoryBytes: 1 << 20}
	p.Tenants[0].Limits, p.TrustClasses[0].Limits = big, big
	p.QueueClasses[0].MaxQueued = 64
	l := newLedger(policy.MustCompile(p), 2, 1)
	if !l.scopes[0].sharded || l.scopes[l.tenantBase+1].sharded {
		t.Fatal("want the node sharded and tenant b not")
	}
	st := &l.stripes[0]
	small := Reservation{Tenant: 1, CPUFuel: 1, MemoryBytes: 1}
	if _, answer := commitOn(l, st, "b0", small, ^uint64(0)); answer != "ok" {
		t.Fatal(answer)
	}
	s, exact := l.PreCheck(FingerprintOf(1, "b1"), &small)
	if !exact || s != (Shortfall{Scope: TenantScope, Dimension: LiveActivations}) {
		t.Fatalf("tenant b full: %+v %v", s, exact)
	}
	// Fill the node from tenant a until its pool is empty: a full node
	// is then the exact path's answer, not the pre-check's.
	r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
	for i := 0; l.scopes[0].count[LiveActivations].Load() > 0; i++ {
		tk, answer := commitOn(l, st, fmt.Sprint("a", i), r, ^uint64(0))
		if answer != "ok" {
			t.Fatalf("a%d: %s", i, answer)
		}
		l.updateOn(st, func(tx Tx) { tx.Start(tk) }) // keeps the node's queued slots free
	}
	if s, exact := l.PreCheck(FingerprintOf(0, "next"), &r); exact {
		t.Fatalf("a sharded scope with an empty pool: %+v exact", s)
	}
	if s, exact := l.PreCheck(FingerprintOf(0, "next"), &small); exact {
		t.Fatalf("behind a sharded scope with an empty pool: %+v exact", s)
	}
}

// Within one transaction a second Shortfall for another reservation
// gives the first claim back, and a second CellBacklog of another class
// moves the raise: what Reserve keeps is the last reservation only.
func TestAskingTwiceKeepsTheLastClaim(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	st := &l.stripes[1]
	big := Reservation{Tenant: 0, CPUFuel: 3, MemoryBytes: 3}
	small := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1, CellClass: policy.Small}
	var tk Ticket
	l.updateOn(st, func(tx Tx) {
		for _, r := range []*Reservation{&big, &big, &small} { // the same twice, then another
			if tx.Shortfall(r).Scope != NoScope {
				t.Fatal("no room")
			}
		}
		if a, b := tx.CellBacklog(policy.Tiny), tx.CellBacklog(policy.Tiny); a != 0 || b != 0 {
			t.Fatalf("backlog %d then %d", a, b)
		}
		if n := tx.CellBacklog(policy.Small); n != 0 {
			t.Fatalf("small backlog %d", n)
		}
		tk = tx.Reserve(FingerprintOf(0, "x"), "x", small)
	})
	want := Snapshot{
		Node:        Held{Live: 1, Queued: 1, CPUFuel: 1, MemoryBytes: 1},
		Tenants:     []Held{{Live: 1, Queued: 1, CPUFuel: 1, MemoryBytes: 1}, {}},
		TrustClass:  []Held{{Live: 1, Queued: 1, CPUFuel: 1, MemoryBytes: 1}, {}},
		QueueQueued: []uint64{1, 0},
		CellLive:    [policy.NumCellClasses]uint64{policy.Small: 1},
	}
	if got := snapshot(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if !release(l, tk) {
		t.Fatal("release")
	}
}

// A Reserve of a key whose bucket lock differs from the one the
// transaction holds runs the transaction again on the exact path, which
// needs no bucket lock: the reservation is made once.
func TestReserveOfASecondBucketRunsExact(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	first := "k0"
	second := ""
	for i := 1; second == ""; i++ {
		id := fmt.Sprint("k", i)
		if l.table.lockOf(FingerprintOf(0, id)) != l.table.lockOf(FingerprintOf(0, first)) {
			second = id
		}
	}
	r := Reservation{CPUFuel: 1, MemoryBytes: 1}
	runs := 0
	var tk Ticket
	l.updateOn(&l.stripes[0], func(tx Tx) {
		runs++
		if tx.Contains(FingerprintOf(0, first), 0, first) {
			t.Fatal("contains")
		}
		tk = tx.Reserve(FingerprintOf(0, second), second, r)
	})
	if runs != 2 || l.LiveEntries() != 1 || !release(l, tk) {
		t.Fatalf("%d runs, %d live", runs, l.LiveEntries())
	}
}

// A Reserve that does not fit is a caller's bug: on the exact path, where
// a fast Reserve without room ends up, it panics.
func TestReserveWithoutRoomPanics(t *testing.T) {
	p := stripedPolicy()
	p.Node.Limits.MaxLiveActivations = 1
	l := newLedger(policy.MustCompile(p), 2, 1)
	r := Reservation{CPUFuel: 1, MemoryBytes: 1}
	reserve(l, FingerprintOf(0, "a"), "a", r)
	defer func() {
		if got := recover(); got != "atomicledger: Reserve of a reservation that does not fit" {
			t.Fatalf("recovered %v", got)
		}
	}()
	reserve(l, FingerprintOf(0, "b"), "b", r)
}

// With one stripe there is nothing to choose and no bucket to lock;
// everything else is the same.
func TestOneStripe(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 1, shardMinimum)
	r := Reservation{CPUFuel: 1, MemoryBytes: 1}
	var tk Ticket
	l.Update(func(tx Tx) {
		if tx.Contains(FingerprintOf(0, "a"), 0, "a") || tx.Shortfall(&r).Scope != NoScope {
			t.Fatal("no room")
		}
		tk = tx.Reserve(FingerprintOf(0, "a"), "a", r)
	})
	if l.CellClassLive(policy.Tiny) != 1 {
		t.Fatal("a Reserve without CellBacklog did not raise the backlog")
	}
	if !start(l, tk) || l.Node() != (Held{Live: 1, CPUFuel: 1, MemoryBytes: 1}) || !release(l, tk) || l.LiveEntries() != 0 {
		t.Fatal("cycle")
	}
}

// A scope is sharded exactly when every dimension it limits allows the
// minimum per stripe (a queue class limits only its queued slots), and
// its batch is a quarter of a stripe's share, at least 1.
func TestShardingRule(t *testing.T) {
	cases := []struct {
		name    string
		limit   amounts
		kind    Scope
		sharded bool
	}{
		{"every dimension at the minimum", amounts{16, 16, 16, 16}, TenantScope, true},
		{"live one below", amounts{15, 16, 16, 16}, TenantScope, false},
		{"queued one below", amounts{16, 15, 16, 16}, TenantScope, false},
		{"fuel one below", amounts{16, 16, 15, 16}, TenantScope, false},
		{"memory one below", amounts{16, 16, 16, 15}, TenantScope, false},
		{"a queue class counts only queued", amounts{0, 16, 0, 0}, QueueClassScope, true},
		{"a small queue class", amounts{^uint64(0), 15, ^uint64(0), ^uint64(0)}, QueueClassScope, false},
	}
	for _, c := range cases {
		var sc scope
		sc.init(c.kind, c.limit, 2, 8)
		if sc.sharded != c.sharded {
			t.Errorf("%s: sharded %v, want %v", c.name, sc.sharded, c.sharded)
		}
		if c.sharded && c.kind == TenantScope && sc.batch != (amounts{2, 2, 2, 2}) {
			t.Errorf("%s: batch %v", c.name, sc.batch)
		}
	}
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	if l.entryBatch != 3 {
		t.Errorf("entry batch %d, want a quarter of 24 over 2 stripes", l.entryBatch)
	}
}

// The per-scope reads name the scope they are asked for, past the first
// of each kind.
func TestReadsOfTheSecondClass(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	// Tenant 1 holds one, trust class 1 two, queue class 1 three: no
	// scope's count equals its neighbour's.
	var held []Ticket
	for i, r := range []Reservation{
		{Tenant: 1, TrustClass: 1, QueueClass: 1},
		{Tenant: 0, TrustClass: 1, QueueClass: 1},
		{Tenant: 0, TrustClass: 0, QueueClass: 1},
	} {
		r.CPUFuel, r.MemoryBytes = 1, 1
		held = append(held, reserve(l, FingerprintOf(r.Tenant, fmt.Sprint(i)), fmt.Sprint(i), r))
	}
	if l.Tenant(1).Live != 1 || l.TrustClass(1).Live != 2 || l.TrustClass(0).Live != 1 || l.QueueClassQueued(1) != 3 || l.QueueClassQueued(0) != 0 {
		t.Fatalf("tenant %+v, trust classes %+v %+v, queue classes %d %d",
			l.Tenant(1), l.TrustClass(0), l.TrustClass(1), l.QueueClassQueued(0), l.QueueClassQueued(1))
	}
	for _, tk := range held {
		if !release(l, tk) {
			t.Fatal("release")
		}
	}
}

// A sharded pool that holds exactly the need has room: the pre-check
// goes on to the next scope and answers there.
func TestPreCheckTrustsAPoolOfExactlyTheNeed(t *testing.T) {
	p := stripedPolicy()
	p.Tenants[1].Limits = policy.Limits{MaxLiveActivations: 1, MaxQueuedReservations: 1, MaxReservedCPUFuel: 100, MaxReservedMemoryBytes: 100}
	big := policy.Limits{MaxLiveActivations: 64, MaxQueuedReservations: 64, MaxReservedCPUFuel: 1 << 20, MaxReservedMemoryBytes: 1 << 20}
	p.Tenants[0].Limits, p.TrustClasses[0].Limits = big, big
	p.QueueClasses[0].MaxQueued = 64
	l := newLedger(policy.MustCompile(p), 2, 1)
	st := &l.stripes[0]
	small := Reservation{Tenant: 1, CPUFuel: 1, MemoryBytes: 1}
	if _, answer := commitOn(l, st, "b0", small, ^uint64(0)); answer != "ok" {
		t.Fatal(answer)
	}
	// Move the node's pool down to one live slot, then ask for tenant b.
	l.mu.Lock()
	pool := l.scopes[0].count[LiveActivations].Load()
	l.scopes[0].count[LiveActivations].Store(1)
	st.room[0][LiveActivations] += pool - 1
	l.mu.Unlock()
	s, exact := l.PreCheck(FingerprintOf(1, "b1"), &small)
	if !exact || s != (Shortfall{Scope: TenantScope, Dimension: LiveActivations}) {
		t.Fatalf("a pool of exactly the need: %+v %v", s, exact)
	}
}

// The exact path makes the sequence counters odd only once it moves
// something: a transaction or a reader holding every lock leaves the
// pre-check exact until then.
func TestTheExactPathIsOddOnlyWhileItWrites(t *testing.T) {
	p := stripedPolicy()
	p.Tenants[1].Limits = policy.Limits{MaxLiveActivations: 1, MaxQueuedReservations: 1, MaxReservedCPUFuel: 100, MaxReservedMemoryBytes: 100}
	l := newLedger(policy.MustCompile(p), 2, 1)
	small := Reservation{Tenant: 1, CPUFuel: 1, MemoryBytes: 1}
	reserve(l, FingerprintOf(1, "b0"), "b0", small)
	other := reserve(l, FingerprintOf(0, "a0"), "a0", Reservation{CPUFuel: 1, MemoryBytes: 1})
	full := Shortfall{Scope: TenantScope, Dimension: LiveActivations}
	runs := 0
	l.Update(func(tx Tx) {
		if runs++; runs == 1 {
			tx.CellBacklog(0) // reserves nothing: the exact path runs this again
			return
		}
		if s, exact := l.PreCheck(FingerprintOf(1, "b1"), &small); !exact || s != full {
			t.Errorf("before a write on the exact path: %+v %v", s, exact)
		}
		tx.Release(other)
		if _, exact := l.PreCheck(FingerprintOf(1, "b1"), &small); exact {
			t.Error("the pre-check trusted counters the exact path was moving")
		}
	})
	if s, exact := l.PreCheck(FingerprintOf(1, "b1"), &small); !exact || s != full || runs != 2 {
		t.Fatalf("after: %+v %v, %d runs", s, exact, runs)
	}
}

// A Reserve of another cell class than the one CellBacklog raised moves
// the raise to the reservation's class.
func TestReserveMovesTheRaiseToItsClass(t *testing.T) {
	l := newLedger(policy.MustCompile(stripedPolicy()), 2, 1)
	r := Reservation{CPUFuel: 1, MemoryBytes: 1, CellClass: policy.Small}
	var tk Ticket
	l.updateOn(&l.stripes[0], func(tx Tx) {
		if tx.Shortfall(&r).Scope != NoScope {
			t.Fatal("no room")
		}
		tx.CellBacklog(policy.Tiny)
		tk = tx.Reserve(FingerprintOf(0, "x"), "x", r)
	})
	if s := snapshot(l); s.CellLive != ([policy.NumCellClasses]uint64{policy.Small: 1}) {
		t.Fatalf("backlogs %v", s.CellLive)
	}
	if !release(l, tk) {
		t.Fatal("release")
	}
}
