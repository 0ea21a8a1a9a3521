package cellpool_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/policy"
)

func newPool(t *testing.T, parallelism map[policy.CellClass]uint64) *cellpool.FixedCellPool {
	t.Helper()
	cfg := cellpool.Config{EstimatedServiceTime: 100 * time.Millisecond, MaxBacklog: 64, StopDelay: 30 * time.Second}
	for class, n := range parallelism {
		cfg.Parallelism[class] = n
	}
	p, err := cellpool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAcquireHandsOutExactlyParallelismCells(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 3, policy.Small: 1})
	seen := map[cellpool.CellID]bool{}
	var leases []*cellpool.Lease
	for range 3 {
		l, err := p.Acquire(policy.Tiny)
		if err != nil {
			t.Fatal(err)
		}
		if seen[l.Cell()] {
			t.Fatalf("cell %+v leased twice", l.Cell())
		}
		seen[l.Cell()] = true
		leases = append(leases, l)
	}
	if _, err := p.Acquire(policy.Tiny); !errors.Is(err, cellpool.ErrNoFreeCell) {
		t.Fatalf("fourth tiny acquire: %v, want ErrNoFreeCell", err)
	}
	if _, err := p.Acquire(policy.Small); err != nil {
		t.Fatalf("the other class is independent: %v", err)
	}
	if _, err := p.Acquire(policy.Large); !errors.Is(err, cellpool.ErrClassNotPooled) {
		t.Fatalf("unconfigured class: %v", err)
	}
	if got := p.Stats(policy.Tiny); got != (cellpool.ClassStats{Configured: 3, Usable: 3, Free: 0, Leased: 3}) {
		t.Fatalf("stats %+v", got)
	}
	for _, l := range leases {
		l.Release()
	}
	if got := p.Stats(policy.Tiny); got != (cellpool.ClassStats{Configured: 3, Usable: 3, Free: 3}) {
		t.Fatalf("stats after release %+v", got)
	}
}

func TestLeaseEndsExactlyOnce(t *testing.T) {
	tests := []struct {
		name          string
		first, second func(*cellpool.Lease) bool
		wantFree      uint64
	}{
		{"release then release", (*cellpool.Lease).Release, (*cellpool.Lease).Release, 1},
		{"release then quarantine", (*cellpool.Lease).Release, (*cellpool.Lease).Quarantine, 1},
		{"quarantine then release", (*cellpool.Lease).Quarantine, (*cellpool.Lease).Release, 0},
		{"quarantine then quarantine", (*cellpool.Lease).Quarantine, (*cellpool.Lease).Quarantine, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 1})
			l, err := p.Acquire(policy.Tiny)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.first(l) {
				t.Fatal("first end reported false")
			}
			if tt.second(l) {
				t.Fatal("second end reported true")
			}
			if l.Held() {
				t.Fatal("ended lease still held")
			}
			if s := p.Stats(policy.Tiny); s.Free != tt.wantFree || s.Leased != 0 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
	t.Run("the zero lease is inert", func(t *testing.T) {
		var l cellpool.Lease
		if l.Held() || l.Release() || l.Quarantine() {
			t.Fatal("zero lease acted")
		}
	})
}

func TestReleasedCellIsReused(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 1})
	l, _ := p.Acquire(policy.Tiny)
	first := l.Cell()
	l.Release()
	l2, err := p.Acquire(policy.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Cell() != first {
		t.Fatalf("got %+v, want the released cell %+v", l2.Cell(), first)
	}
	l2.Release()
}

func TestQuarantineRemovesCapacityUntilReplenished(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 2})
	a, _ := p.Acquire(policy.Tiny)
	b, _ := p.Acquire(policy.Tiny)
	quarantined := a.Cell()
	a.Quarantine()
	b.Release()
	if got := p.Stats(policy.Tiny); got != (cellpool.ClassStats{Configured: 2, Usable: 1, Free: 1, Quarantined: 1}) {
		t.Fatalf("stats %+v", got)
	}
	if !p.Degraded(policy.Tiny) {
		t.Fatal("not degraded")
	}
	c, _ := p.Acquire(policy.Tiny)
	if c.Cell().Slot == quarantined.Slot {
		t.Fatal("a quarantined cell was handed out")
	}
	if _, err := p.Acquire(policy.Tiny); !errors.Is(err, cellpool.ErrNoFreeCell) {
		t.Fatalf("got %v, want ErrNoFreeCell", err)
	}
	fresh, err := p.Replenish(policy.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Slot != quarantined.Slot || fresh.Generation != quarantined.Generation+1 {
		t.Fatalf("replacement %+v for %+v", fresh, quarantined)
	}
	if p.Degraded(policy.Tiny) {
		t.Fatal("still degraded after replenishing")
	}
	d, err := p.Acquire(policy.Tiny)
	if err != nil || d.Cell() != fresh {
		t.Fatalf("acquire after replenish: %+v %v", d.Cell(), err)
	}
	if _, err := p.Replenish(policy.Tiny); !errors.Is(err, cellpool.ErrNothingQuarantined) {
		t.Fatalf("replenish with nothing quarantined: %v", err)
	}
	if _, err := p.Replenish(policy.Large); !errors.Is(err, cellpool.ErrClassNotPooled) {
		t.Fatalf("replenish unpooled class: %v", err)
	}
	c.Release()
	d.Release()
}

func TestChangedFiresOnEveryChange(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 2})
	fired := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	ch := p.Changed()
	a, _ := p.Acquire(policy.Tiny)
	b, _ := p.Acquire(policy.Tiny)
	if fired(ch) {
		t.Fatal("acquiring fired Changed")
	}
	a.Release()
	if !fired(ch) {
		t.Fatal("release did not fire Changed")
	}
	ch = p.Changed()
	b.Quarantine()
	if !fired(ch) {
		t.Fatal("quarantine did not fire Changed")
	}
	ch = p.Changed()
	if _, err := p.Replenish(policy.Tiny); err != nil {
		t.Fatal(err)
	}
	if !fired(ch) {
		t.Fatal("replenish did not fire Changed")
	}
	ch = p.Changed()
	p.Close()
	if !fired(ch) {
		t.Fatal("close did not fire Changed")
	}
}

func TestClosedPoolStillTakesLeasesBack(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 1})
	l, _ := p.Acquire(policy.Tiny)
	p.Close()
	if _, err := p.Acquire(policy.Tiny); !errors.Is(err, cellpool.ErrClosed) {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if p.Free(policy.Tiny) != 0 {
		t.Fatal("a closed pool reports free cells")
	}
	if !l.Release() {
		t.Fatal("release after close failed")
	}
}

func TestNewRejectsUnboundedParallelism(t *testing.T) {
	var cfg cellpool.Config
	cfg.Parallelism[policy.Tiny] = cellpool.MaxCellsPerClass + 1
	if _, err := cellpool.New(cfg); !errors.Is(err, cellpool.ErrTooManyCells) {
		t.Fatalf("got %v, want ErrTooManyCells", err)
	}
	// The largest parallelism a policy validates with builds a pool.
	cfg.Parallelism[policy.Tiny] = policy.MaxCellParallelism
	if _, err := cellpool.New(cfg); err != nil {
		t.Fatalf("parallelism %d: %v", policy.MaxCellParallelism, err)
	}
}

func TestConfigFromPolicyAgreesWithAdmission(t *testing.T) {
	n := nodetest.New(t, nil)
	cfg := cellpool.ConfigFromPolicy(n.Provider.Policy())
	want := [policy.NumCellClasses]uint64{policy.Tiny: 8, policy.Small: 4, policy.Standard: 2, policy.ExtraLarge: 1}
	if cfg.Parallelism != want {
		t.Fatalf("parallelism %v, want %v", cfg.Parallelism, want)
	}
	if cfg.EstimatedServiceTime != 100*time.Millisecond || cfg.MaxBacklog != 64 || cfg.StopDelay != 30*time.Second {
		t.Fatalf("config %+v", cfg)
	}
}

func TestQueueDelayFloor(t *testing.T) {
	tests := []struct {
		name        string
		quarantined int
		want        time.Duration
	}{
		{"pool and configuration agree", 0, 0},
		{"one of four lost: the backlog waits on three cells", 1, 21 * 100 * time.Millisecond},
		{"three of four lost: the backlog waits on one cell", 3, 64 * 100 * time.Millisecond},
		{"no usable cell stops admission", 4, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, map[policy.CellClass]uint64{policy.Small: 4})
			for range tt.quarantined {
				l, _ := p.Acquire(policy.Small)
				l.Quarantine()
			}
			if got := p.QueueDelayFloor(policy.Small); got != tt.want {
				t.Fatalf("floor %v, want %v", got, tt.want)
			}
			if got := p.QueueDelayFloor(policy.Tiny); got != 0 {
				t.Fatalf("an unpooled class's floor is %v", got)
			}
		})
	}
}

// TestDegradedClassStopsAdmissionUntilPoolAgrees publishes the pool's
// floor through the node load state, as the sampler does, and checks that
// admission of the degraded class stops while other classes are admitted,
// and resumes once the pool is whole again.
func TestDegradedClassStopsAdmissionUntilPoolAgrees(t *testing.T) {
	n := nodetest.New(t, nil)
	p, err := cellpool.New(cellpool.ConfigFromPolicy(n.Provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	publish := func() {
		var s core.LoadSample
		s.CPUPressure, s.MemoryPressure = 0.1, 0.1
		for class := range policy.NumCellClasses {
			s.QueueDelay[class] = p.QueueDelayFloor(policy.CellClass(class))
		}
		n.Publish(t, s)
	}
	admit := func(a nodetest.Ask) error {
		permit, err := n.Controller.Admit(nodetest.Request(a))
		if err == nil {
			permit.Release()
		}
		return err
	}
	tiny := nodetest.Ask{}
	small := nodetest.Ask{Memory: 32 << 20}
	short := nodetest.Ask{WallTime: 500 * time.Millisecond}

	if err := admit(short); err != nil {
		t.Fatalf("healthy pool: %v", err)
	}
	// One tiny cell lost: 64 backlog over 7 cells is 9 waves of 100ms,
	// more than a 500ms grant can wait.
	l, _ := p.Acquire(policy.Tiny)
	l.Quarantine()
	publish()
	wantInfeasible(t, admit(short), true)
	if err := admit(tiny); err != nil {
		t.Fatalf("a long grant still fits a slightly degraded class: %v", err)
	}
	// Every tiny cell lost: no tiny admission at all, small unaffected.
	for range 7 {
		l, err := p.Acquire(policy.Tiny)
		if err != nil {
			t.Fatal(err)
		}
		l.Quarantine()
	}
	publish()
	wantInfeasible(t, admit(tiny), true)
	if err := admit(small); err != nil {
		t.Fatalf("another class must not be affected: %v", err)
	}
	for range 8 {
		if _, err := p.Replenish(policy.Tiny); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	if err := admit(short); err != nil {
		t.Fatalf("after replenishing: %v", err)
	}
	if held := n.Provider.Usage().Held(); len(held) != 0 || n.Provider.LiveReservations() != 0 {
		t.Fatalf("ledger not empty: %q, live table %d", held, n.Provider.LiveReservations())
	}
}

func wantInfeasible(t *testing.T, err error, retryable bool) {
	t.Helper()
	var e core.Error
	if !errors.As(err, &e) || e.Reason() != core.ReasonQueueDeadlineInfeasible || e.Retryable() != retryable {
		t.Fatalf("got %v, want queue-deadline-infeasible retryable=%v", err, retryable)
	}
}

func TestConcurrentLeasesNeverShareACell(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 4})
	var mu sync.Mutex
	inUse := map[cellpool.CellID]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 500 {
				changed := p.Changed()
				l, err := p.Acquire(policy.Tiny)
				if err != nil {
					<-changed
					continue
				}
				mu.Lock()
				if inUse[l.Cell()] {
					t.Errorf("cell %+v leased twice", l.Cell())
				}
				inUse[l.Cell()] = true
				mu.Unlock()
				mu.Lock()
				delete(inUse, l.Cell())
				mu.Unlock()
				l.Release()
			}
		})
	}
	wg.Wait()
	if s := p.Stats(policy.Tiny); s.Free != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestQueueDelayFloorCapsAtStopDelay(t *testing.T) {
	cfg := cellpool.Config{EstimatedServiceTime: time.Second, MaxBacklog: 1 << 40, StopDelay: 30 * time.Second}
	cfg.Parallelism[policy.Tiny] = 2
	p, err := cellpool.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := p.Acquire(policy.Tiny)
	l.Quarantine()
	if got := p.QueueDelayFloor(policy.Tiny); got != 30*time.Second {
		t.Fatalf("floor %v, want the stop delay", got)
	}
}

func TestLeaseCycleAllocatesOnlyTheLease(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 1})
	allocs := testing.AllocsPerRun(100, func() {
		l, err := p.Acquire(policy.Tiny)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	})
	if allocs > 1 {
		t.Fatalf("%.1f allocations per acquire and release, want at most 1", allocs)
	}
}

func TestChangedIsOnlyReplacedOnceHandedOut(t *testing.T) {
	p := newPool(t, map[policy.CellClass]uint64{policy.Tiny: 1})
	ch := p.Changed()
	l, _ := p.Acquire(policy.Tiny)
	l.Release()
	<-ch // fired
	next := p.Changed()
	if next == ch {
		t.Fatal("a fired channel was handed out again")
	}
	if again := p.Changed(); again != next {
		t.Fatal("an unfired channel was replaced")
	}
}
