package atomicledger

import (
	"fmt"
	"math/bits"
	"reflect"
	"testing"
	"unsafe"

	"latent.dev/admission/policy"
)

// snapshot reads every counter under the mutex.
func snapshot(l *Ledger) Snapshot {
	var s Snapshot
	l.SnapshotInto(&s)
	return s
}

func start(l *Ledger, tk Ticket) (ok bool) {
	l.Update(func(tx Tx) { ok = tx.Start(tk) })
	return ok
}

func release(l *Ledger, tk Ticket) (ok bool) {
	l.Update(func(tx Tx) { ok = tx.Release(tk) })
	return ok
}

func wantState(t *testing.T, step string, l *Ledger, want Snapshot) {
	t.Helper()
	if got := snapshot(l); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", step, got, want)
	}
	var cells uint64
	for _, n := range want.CellLive {
		cells += n
	}
	l.Update(func(tx Tx) {
		if got := tx.CellBacklog(policy.Small); got != want.CellLive[policy.Small] {
			t.Fatalf("%s: small cell backlog %d, want %d", step, got, want.CellLive[policy.Small])
		}
	})
	if n := l.LiveEntries(); n != int(cells) {
		t.Fatalf("%s: %d live entries, want %d", step, n, cells)
	}
}

// Every scope's counters move by exactly the reservation at reserve,
// give back only the queued slots at start, and return to zero after
// release, whether the reservation was queued or executing when
// released.
func TestCountersFollowReserveStartAndRelease(t *testing.T) {
	l := testLedger(t, 4)
	a := Reservation{Tenant: 1, CPUFuel: 3, MemoryBytes: 5, CellClass: policy.Small}
	b := Reservation{Tenant: 0, CPUFuel: 7, MemoryBytes: 11, CellClass: policy.Tiny}
	empty := snapshot(l)
	if !reflect.DeepEqual(empty, Snapshot{Tenants: []Held{{}, {}}, TrustClass: []Held{{}}, QueueQueued: []uint64{0}}) {
		t.Fatalf("new ledger: %+v", empty)
	}

	ta := reserve(l, FingerprintOf(1, "a"), "a", a)
	wantState(t, "reserve a", l, Snapshot{
		Node:        Held{Live: 1, Queued: 1, CPUFuel: 3, MemoryBytes: 5},
		Tenants:     []Held{{}, {Live: 1, Queued: 1, CPUFuel: 3, MemoryBytes: 5}},
		TrustClass:  []Held{{Live: 1, Queued: 1, CPUFuel: 3, MemoryBytes: 5}},
		QueueQueued: []uint64{1},
		CellLive:    [policy.NumCellClasses]uint64{policy.Small: 1},
	})
	tb := reserve(l, FingerprintOf(0, "b"), "b", b)
	both := Snapshot{
		Node:        Held{Live: 2, Queued: 2, CPUFuel: 10, MemoryBytes: 16},
		Tenants:     []Held{{Live: 1, Queued: 1, CPUFuel: 7, MemoryBytes: 11}, {Live: 1, Queued: 1, CPUFuel: 3, MemoryBytes: 5}},
		TrustClass:  []Held{{Live: 2, Queued: 2, CPUFuel: 10, MemoryBytes: 16}},
		QueueQueued: []uint64{2},
		CellLive:    [policy.NumCellClasses]uint64{policy.Tiny: 1, policy.Small: 1},
	}
	wantState(t, "reserve b", l, both)
	if got := l.Node(); got != both.Node {
		t.Fatalf("lock-free node read %+v", got)
	}
	if got := l.Tenant(1); got != both.Tenants[1] {
		t.Fatalf("lock-free tenant read %+v", got)
	}
	if got := l.TrustClass(0); got != both.TrustClass[0] {
		t.Fatalf("lock-free trust class read %+v", got)
	}
	if l.QueueClassQueued(0) != 2 || l.CellClassLive(policy.Small) != 1 {
		t.Fatal("queue or cell read")
	}

	if !start(l, ta) {
		t.Fatal("start of a queued reservation failed")
	}
	started := Snapshot{
		Node:        Held{Live: 2, Queued: 1, CPUFuel: 10, MemoryBytes: 16},
		Tenants:     []Held{{Live: 1, Queued: 1, CPUFuel: 7, MemoryBytes: 11}, {Live: 1, Queued: 0, CPUFuel: 3, MemoryBytes: 5}},
		TrustClass:  []Held{{Live: 2, Queued: 1, CPUFuel: 10, MemoryBytes: 16}},
		QueueQueued: []uint64{1},
		CellLive:    [policy.NumCellClasses]uint64{policy.Tiny: 1, policy.Small: 1},
	}
	wantState(t, "start a", l, started)
	if start(l, ta) {
		t.Fatal("a second start of the same reservation succeeded")
	}
	wantState(t, "second start of a", l, started)

	if !release(l, ta) {
		t.Fatal("release of an executing reservation failed")
	}
	onlyB := Snapshot{
		Node:        Held{Live: 1, Queued: 1, CPUFuel: 7, MemoryBytes: 11},
		Tenants:     []Held{{Live: 1, Queued: 1, CPUFuel: 7, MemoryBytes: 11}, {}},
		TrustClass:  []Held{{Live: 1, Queued: 1, CPUFuel: 7, MemoryBytes: 11}},
		QueueQueued: []uint64{1},
		CellLive:    [policy.NumCellClasses]uint64{policy.Tiny: 1},
	}
	wantState(t, "release executing a", l, onlyB)
	if release(l, ta) || start(l, ta) {
		t.Fatal("a released ticket released or started again")
	}
	wantState(t, "second release of a", l, onlyB)

	if !release(l, tb) {
		t.Fatal("release of a queued reservation failed")
	}
	wantState(t, "release queued b", l, empty)
	if release(l, tb) {
		t.Fatal("a released ticket released again")
	}
	wantState(t, "second release of b", l, empty)
}

// A ticket whose entry was released and reused names nothing: it can
// neither start nor release the entry's new reservation. Tickets that
// never came from the ledger name nothing either.
func TestStaleAndForeignTicketsNameNothing(t *testing.T) {
	l := testLedger(t, 1)
	r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
	old := reserve(l, FingerprintOf(0, "old"), "old", r)
	if !release(l, old) {
		t.Fatal("release")
	}
	current := reserve(l, FingerprintOf(0, "new"), "new", r)
	if current.Slot != old.Slot || current.generation == old.generation {
		t.Fatalf("the one entry was not reused: %+v then %+v", old, current)
	}
	queued := snapshot(l)
	for name, tk := range map[string]Ticket{
		"stale":             old,
		"zero":              {},
		"beyond the table":  {Slot: 1, generation: current.generation},
		"future generation": {Slot: current.Slot, generation: current.generation + 1},
		// What a holder outside the package can build: the live slot,
		// with the generation it cannot set.
		"built outside": {Slot: current.Slot},
	} {
		if start(l, tk) || release(l, tk) {
			t.Fatalf("%s ticket %+v started or released", name, tk)
		}
		wantState(t, name+" ticket", l, queued)
	}
	l.Update(func(tx Tx) {
		if !tx.Contains(FingerprintOf(0, "new"), 0, "new") || tx.Contains(FingerprintOf(0, "old"), 0, "old") {
			t.Fatal("contains")
		}
	})
	if !start(l, current) || !release(l, current) {
		t.Fatal("the current ticket")
	}
}

// TestGenerationWrapsPastZero: an entry reused 2^32 times wraps its
// generation to 1, never 0 (the zero ticket's), and the ticket of the
// reservation before the wrap is stale after it.
func TestGenerationWrapsPastZero(t *testing.T) {
	l := testLedger(t, 1)
	r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
	l.table.entries[0].generation = ^uint32(0) - 1
	last := reserve(l, FingerprintOf(0, "last"), "last", r)
	if last.generation != ^uint32(0) || !release(l, last) {
		t.Fatalf("the last generation before the wrap: %+v", last)
	}
	wrapped := reserve(l, FingerprintOf(0, "wrapped"), "wrapped", r)
	if wrapped.Slot != last.Slot || wrapped.generation != 1 {
		t.Fatalf("after the wrap: %+v, want generation 1", wrapped)
	}
	if start(l, last) || release(l, last) {
		t.Fatal("the ticket from before the wrap started or released")
	}
	if !start(l, wrapped) || !release(l, wrapped) {
		t.Fatal("the ticket after the wrap")
	}
}

// limitsLedger is a ledger of one tenant, trust class and queue class
// with the given limits.
func limitsLedger(t testing.TB, node, tenant, trust policy.Limits, maxQueued uint64) *Ledger {
	t.Helper()
	p := &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement: policy.Placement{Architecture: "x", Region: "r", Zone: "z"},
			Backends:  []string{"wasm"}, StateModels: []string{"stateless"},
			BudgetCeiling: policy.NodeBudgetCeiling{CPUFuel: 1, MemoryBytes: 1, WallTime: 1},
			Limits:        node, MaximumIdentifierBytes: 64, MaximumGeneratedIdentifierBytes: 96,
			Overload: policy.OverloadPolicy{CPUThreshold: 1, MemoryThreshold: 1, MaximumObservationAge: 1},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "q", MaxQueued: maxQueued}},
		CellClasses:  []policy.CellClassPolicy{{Class: "tiny", MemoryBytes: 1, Parallelism: 1, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{{Name: "t", CellClasses: []string{"tiny"}, Limits: trust}},
		Tenants:      []policy.TenantPolicy{{ID: "a", TrustClasses: []string{"t"}, CellClasses: []string{"tiny"}, Limits: tenant}},
	}
	return New(policy.MustCompile(p))
}

// Each scope and dimension is reported when it alone lacks room, at the
// exact boundary, and the shortfall is permanent exactly when the
// reservation would not fit the scope even if it were empty.
func TestShortfallAtEachScopeAndDimension(t *testing.T) {
	roomy := policy.Limits{MaxLiveActivations: 8, MaxQueuedReservations: 8, MaxReservedCPUFuel: 100, MaxReservedMemoryBytes: 100}
	const roomyQueue = 8
	type edit func(node, tenant, trust *policy.Limits, queue *uint64)
	scopes := []struct {
		scope Scope
		limit func(node, tenant, trust *policy.Limits) *policy.Limits
	}{
		{NodeScope, func(n, _, _ *policy.Limits) *policy.Limits { return n }},
		{TenantScope, func(_, t, _ *policy.Limits) *policy.Limits { return t }},
		{TrustClassScope, func(_, _, tc *policy.Limits) *policy.Limits { return tc }},
	}
	type step struct {
		held  []Reservation // reserved (and kept queued) first
		start bool          // the held reservations start executing
		try   Reservation
		want  Shortfall
	}
	one := Reservation{CPUFuel: 1, MemoryBytes: 1}
	type shortfallCase struct {
		name  string
		edit  edit
		steps []step
	}
	var cases []shortfallCase
	for _, sc := range scopes {
		on := func(f func(l *policy.Limits)) edit {
			return func(n, te, tr *policy.Limits, _ *uint64) { f(sc.limit(n, te, tr)) }
		}
		s := sc.scope
		cases = append(cases,
			shortfallCase{fmt.Sprintf("scope %d live", s), on(func(l *policy.Limits) { l.MaxLiveActivations = 2 }), []step{
				{held: []Reservation{one}, try: one, want: Shortfall{}},
				{held: []Reservation{one, one}, try: one, want: Shortfall{s, LiveActivations, false}},
				{held: []Reservation{one, one}, start: true, try: one, want: Shortfall{s, LiveActivations, false}},
			}},
			shortfallCase{fmt.Sprintf("scope %d live, none allowed", s), on(func(l *policy.Limits) { l.MaxLiveActivations = 0 }), []step{
				{try: one, want: Shortfall{s, LiveActivations, true}},
			}},
			shortfallCase{fmt.Sprintf("scope %d queued", s), on(func(l *policy.Limits) { l.MaxQueuedReservations = 1 }), []step{
				{try: one, want: Shortfall{}},
				{held: []Reservation{one}, try: one, want: Shortfall{s, QueuedReservations, false}},
				{held: []Reservation{one}, start: true, try: one, want: Shortfall{}},
			}},
			shortfallCase{fmt.Sprintf("scope %d queued, none allowed", s), on(func(l *policy.Limits) { l.MaxQueuedReservations = 0 }), []step{
				{try: one, want: Shortfall{s, QueuedReservations, true}},
			}},
			shortfallCase{fmt.Sprintf("scope %d fuel", s), on(func(l *policy.Limits) { l.MaxReservedCPUFuel = 10 }), []step{
				{try: Reservation{CPUFuel: 10, MemoryBytes: 1}, want: Shortfall{}},
				{try: Reservation{CPUFuel: 11, MemoryBytes: 1}, want: Shortfall{s, CPUFuel, true}},
				{held: []Reservation{{CPUFuel: 4, MemoryBytes: 1}}, try: Reservation{CPUFuel: 6, MemoryBytes: 1}, want: Shortfall{}},
				{held: []Reservation{{CPUFuel: 4, MemoryBytes: 1}}, try: Reservation{CPUFuel: 7, MemoryBytes: 1}, want: Shortfall{s, CPUFuel, false}},
				{held: []Reservation{{CPUFuel: 4, MemoryBytes: 1}}, start: true, try: Reservation{CPUFuel: 7, MemoryBytes: 1}, want: Shortfall{s, CPUFuel, false}},
				{held: []Reservation{{CPUFuel: 4, MemoryBytes: 1}}, try: Reservation{CPUFuel: 10, MemoryBytes: 1}, want: Shortfall{s, CPUFuel, false}},
			}},
			shortfallCase{fmt.Sprintf("scope %d memory", s), on(func(l *policy.Limits) { l.MaxReservedMemoryBytes = 10 }), []step{
				{try: Reservation{CPUFuel: 1, MemoryBytes: 10}, want: Shortfall{}},
				{try: Reservation{CPUFuel: 1, MemoryBytes: 11}, want: Shortfall{s, MemoryBytes, true}},
				{held: []Reservation{{CPUFuel: 1, MemoryBytes: 4}}, try: Reservation{CPUFuel: 1, MemoryBytes: 6}, want: Shortfall{}},
				{held: []Reservation{{CPUFuel: 1, MemoryBytes: 4}}, try: Reservation{CPUFuel: 1, MemoryBytes: 7}, want: Shortfall{s, MemoryBytes, false}},
				{held: []Reservation{{CPUFuel: 1, MemoryBytes: 4}}, try: Reservation{CPUFuel: 1, MemoryBytes: 10}, want: Shortfall{s, MemoryBytes, false}},
			}},
		)
	}
	cases = append(cases,
		shortfallCase{"queue class", func(_, _, _ *policy.Limits, q *uint64) { *q = 1 }, []step{
			{try: one, want: Shortfall{}},
			{held: []Reservation{one}, try: one, want: Shortfall{QueueClassScope, QueuedReservations, false}},
			{held: []Reservation{one}, start: true, try: one, want: Shortfall{}},
		}},
		shortfallCase{"queue class, none allowed", func(_, _, _ *policy.Limits, q *uint64) { *q = 0 }, []step{
			{try: one, want: Shortfall{QueueClassScope, QueuedReservations, true}},
		}},
		shortfallCase{"the node is checked before the tenant, and live before fuel", func(n, te, _ *policy.Limits, _ *uint64) {
			n.MaxReservedCPUFuel, te.MaxLiveActivations = 1, 0
		}, []step{
			{try: Reservation{CPUFuel: 2, MemoryBytes: 1}, want: Shortfall{NodeScope, CPUFuel, true}},
			{try: one, want: Shortfall{TenantScope, LiveActivations, true}},
		}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, st := range tc.steps {
				node, tenant, trust, queue := roomy, roomy, roomy, uint64(roomyQueue)
				tc.edit(&node, &tenant, &trust, &queue)
				l := limitsLedger(t, node, tenant, trust, queue)
				var held []Ticket
				for j, r := range st.held {
					tk := reserve(l, FingerprintOf(0, fmt.Sprint(j)), fmt.Sprint(j), r)
					if st.start && !start(l, tk) {
						t.Fatalf("step %d: start", i)
					}
					held = append(held, tk)
				}
				var got Shortfall
				l.Update(func(tx Tx) { got = tx.Shortfall(&st.try) })
				if got != st.want {
					t.Fatalf("step %d (held %v, started %v, try %+v): shortfall %+v, want %+v", i, st.held, st.start, st.try, got, st.want)
				}
				if pre, exact, _ := l.PreCheck(FingerprintOf(0, "new"), &st.try); !exact || pre != st.want {
					t.Fatalf("step %d: pre-check %+v (exact %v), want %+v", i, pre, exact, st.want)
				}
				if st.want.Scope == NoScope {
					continue
				}
				// Once the held capacity comes back, only a permanent
				// shortfall remains.
				for _, tk := range held {
					release(l, tk)
				}
				want := Shortfall{}
				if st.want.Permanent {
					want = st.want
				}
				if pre, exact, _ := l.PreCheck(FingerprintOf(0, "new"), &st.try); !exact || pre != want {
					t.Fatalf("step %d, all released: pre-check %+v (exact %v), want %+v", i, pre, exact, want)
				}
			}
		})
	}
}

func TestFitsAtTheLimit(t *testing.T) {
	cases := []struct {
		used, need, limit uint64
		want              bool
	}{
		{0, 2, 2, true},
		{0, 3, 2, false},
		{1, 1, 2, true},
		{2, 1, 2, false},
		{2, 0, 2, true},
		{3, 0, 2, false},
		{0, 0, 0, true},
		{^uint64(0), 1, ^uint64(0), false},
		{^uint64(0) - 1, 1, ^uint64(0), true},
		{1, ^uint64(0), ^uint64(0), false},
	}
	for _, c := range cases {
		if got := fits(c.used, c.need, c.limit); got != c.want {
			t.Errorf("fits(%d, %d, %d) = %v, want %v", c.used, c.need, c.limit, got, c.want)
		}
	}
}

// The index is the smallest power of two that keeps at least two buckets
// per entry, and at least two buckets; every entry starts on the table's
// free list, entry 0 first.
func TestLiveTableIndexSize(t *testing.T) {
	for maxLive := uint64(0); maxLive <= 600; maxLive++ {
		tb := newLiveTable(maxLive)
		size := uint64(len(tb.buckets))
		if size < 2 || size&(size-1) != 0 || size < 2*maxLive || (size > 2 && size/2 >= 2*maxLive) || tb.mask != size-1 {
			t.Fatalf("maxLive %d: index of %d buckets, mask %#x", maxLive, size, tb.mask)
		}
		if len(tb.entries) != int(maxLive) || len(tb.free) != int(maxLive) || cap(tb.free) != int(maxLive) || tb.liveCountLocked() != 0 {
			t.Fatalf("maxLive %d: %d entries, %d free", maxLive, len(tb.entries), len(tb.free))
		}
		if i, ok := tb.popLocked(); maxLive > 0 && (!ok || i != 0) || maxLive == 0 && ok {
			t.Fatalf("maxLive %d: entry %d is handed out first (%v)", maxLive, i, ok)
		}
	}
	if bits.OnesCount(uint(len(newLiveTable(1<<20).buckets))) != 1 {
		t.Fatal("large table")
	}
}

// Distinct keys get distinct, non-zero fingerprints: the index relies on
// zero marking an empty slot, and lookups degrade to a scan of one run
// when fingerprints collide.
func TestFingerprintsAreDistinct(t *testing.T) {
	seen := map[Fingerprint]string{}
	for tenant := policy.TenantID(0); tenant < 4; tenant++ {
		for i := range 5000 {
			key := fmt.Sprintf("%d/act-%d", tenant, i)
			fp := FingerprintOf(tenant, fmt.Sprintf("act-%d", i))
			if fp == 0 {
				t.Fatalf("%s: zero fingerprint", key)
			}
			if other, dup := seen[fp]; dup {
				t.Fatalf("%s and %s share fingerprint %#x", key, other, fp)
			}
			seen[fp] = key
		}
	}
}

// A scope's counters and limits fill exactly one cache line, and so does
// a live-table entry; in a new ledger every scope's counters and the
// entries start on line boundaries; the sequence counter that every
// lock-free reader loads has a line of its own, apart from the fields
// before it and the mutex after it.
func TestPaddingIsExact(t *testing.T) {
	if s := unsafe.Sizeof(counters{}); s != cacheLine {
		t.Fatalf("counters are %d bytes, want one %d-byte line", s, cacheLine)
	}
	if s := unsafe.Sizeof(entry{}); s != cacheLine {
		t.Fatalf("a live-table entry is %d bytes, want one %d-byte line", s, cacheLine)
	}
	for _, maxLive := range []uint64{1, 5} {
		n := testLedger(t, maxLive)
		for what, at := range map[string]uintptr{
			"node":   uintptr(unsafe.Pointer(n.node)),
			"tenant": uintptr(unsafe.Pointer(&n.tenant[0])), "trust class": uintptr(unsafe.Pointer(&n.trust[0])),
			"queue class": uintptr(unsafe.Pointer(&n.queue[0])), "live-table entry": uintptr(unsafe.Pointer(&n.table.entries[0])),
		} {
			if at%cacheLine != 0 {
				t.Errorf("a new ledger's %s counters at %#x: not on a line boundary", what, at)
			}
		}
	}
	var l Ledger
	if gap := unsafe.Offsetof(l.seq) - (unsafe.Offsetof(l.node) + unsafe.Sizeof(l.node)); gap < cacheLine {
		t.Fatalf("the sequence counter is %d bytes after the read-mostly fields", gap)
	}
	if gap := unsafe.Offsetof(l.mu) - unsafe.Offsetof(l.seq); gap < cacheLine {
		t.Fatalf("the mutex is %d bytes after the sequence counter", gap)
	}
}

// collidingKeys returns n activation IDs of tenant 0 whose fingerprints
// share one bucket of tb's index.
func collidingKeys(tb *liveTable, n int) []string {
	byHome := map[uint64][]string{}
	for i := 0; ; i++ {
		id := fmt.Sprint("k", i)
		home := uint64(FingerprintOf(0, id)) & tb.mask
		byHome[home] = append(byHome[home], id)
		if len(byHome[home]) == n {
			return byHome[home]
		}
	}
}

// Keys that share a bucket are all found by the lock-free walk too (so
// the pre-check defers each to a transaction), and each is found,
// started and released, whichever place in the chain it holds.
func TestCollidingKeysAreFoundPastTheirHomeSlot(t *testing.T) {
	l := testLedger(t, 4)
	ids := collidingKeys(&l.table, 3)
	r := Reservation{Tenant: 0, CPUFuel: 1, MemoryBytes: 1}
	var tickets []Ticket
	for _, id := range ids {
		tickets = append(tickets, reserve(l, FingerprintOf(0, id), id, r))
	}
	for i, id := range ids {
		if !l.table.mayContain(FingerprintOf(0, id)) {
			t.Fatalf("key %d of a chain: the lock-free walk did not see it", i)
		}
		l.Update(func(tx Tx) {
			if !tx.Contains(FingerprintOf(0, id), 0, id) {
				t.Fatalf("key %d of a probe run is not found", i)
			}
		})
	}
	// Releasing the oldest (the chain's tail) leaves the others
	// reachable, and the released one is gone.
	if !release(l, tickets[0]) {
		t.Fatal("release")
	}
	if l.table.mayContain(FingerprintOf(0, ids[0])) {
		t.Fatal("a released key still looks live to the lock-free walk")
	}
	for i, id := range ids[1:] {
		if !l.table.mayContain(FingerprintOf(0, id)) {
			t.Fatalf("key %d: lost after the head of its run was released", i+1)
		}
		if !start(l, tickets[i+1]) || !release(l, tickets[i+1]) {
			t.Fatalf("key %d: start or release", i+1)
		}
	}
	if n := l.LiveEntries(); n != 0 {
		t.Fatalf("%d live entries left", n)
	}
}
