package cellpool

import (
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/policy"
)

// CellID names one cell. Slot is the cell's place in its class; Generation
// counts the cells that have occupied the slot, so a replacement for a
// quarantined cell is a different cell.
type CellID struct {
	Class      policy.CellClass
	Slot       uint32
	Generation uint32
}

// Lease states.
const (
	leaseHeld uint32 = iota + 1
	leaseReleased
	leaseQuarantined
)

// Lease is the exclusive right to use one cell. Exactly one owner holds
// it and ends it exactly once: Release when the cell is known to be clean
// and reusable, Quarantine when its state is uncertain. Only the pool
// issues live leases; the zero value is inert.
//
// A Lease must not be copied after first use.
type Lease struct {
	noCopy noCopy

	pool *FixedCellPool
	cell CellID

	// state changes only under pool.mu (FixedCellPool.mu) and is read
	// lock-free.
	state atomic.Uint32
}

// Cell names the leased cell.
func (l *Lease) Cell() CellID {
	if l == nil {
		return CellID{}
	}
	return l.cell
}

// Held reports whether the lease has not been ended yet.
func (l *Lease) Held() bool { return l != nil && l.state.Load() == leaseHeld }

// Release returns the cell to the pool for reuse. It reports false, and
// does nothing, if the lease was already ended or is the zero value.
func (l *Lease) Release() bool {
	if !l.Held() {
		return false
	}
	return l.pool.dispose(l, leaseReleased)
}

// Quarantine removes the cell from usable capacity: the pool never hands
// it out again until Replenish replaces it. It reports false, and does
// nothing, if the lease was already ended or is the zero value.
func (l *Lease) Quarantine() bool {
	if !l.Held() {
		return false
	}
	return l.pool.dispose(l, leaseQuarantined)
}

// slotState is where a slot's cell is in its life.
type slotState uint8

const (
	slotFree slotState = iota
	slotLeased
	slotQuarantined
)

type slot struct {
	state      slotState
	generation uint32
}

// classCells is one class's cells; guarded by FixedCellPool.mu.
type classCells struct {
	slots       []slot
	free        []uint32 // stack of free slot indices; reuse is LIFO, which keeps warm cells warm
	quarantined uint64
}

// FixedCellPool holds, per configured cell class, exactly the configured
// number of cells. A cell is free, leased to one [Lease], or quarantined;
// quarantine removes it from usable capacity until [FixedCellPool.Replenish]
// puts a fresh cell in its slot.
//
// The configuration is immutable; mu guards everything after it. The
// pool never calls out while holding mu, so callers may hold their own
// locks around Acquire (the scheduler does).
//
// A FixedCellPool must not be copied after first use.
type FixedCellPool struct {
	noCopy noCopy

	config Config

	mu      sync.Mutex
	classes [policy.NumCellClasses]classCells // guarded by mu
	changed chan struct{}                     // guarded by mu; closed and replaced on a change once handed out
	watched bool                              // guarded by mu; changed has been handed out by Changed
	closed  bool                              // guarded by mu
}

// New builds a pool with every configured cell free.
func New(cfg Config) (*FixedCellPool, error) {
	p := &FixedCellPool{config: cfg, changed: make(chan struct{})}
	for class, n := range cfg.Parallelism {
		if n > MaxCellsPerClass {
			return nil, ErrTooManyCells
		}
		c := &p.classes[class]
		c.slots = make([]slot, n)
		c.free = make([]uint32, n)
		for i := range c.free {
			// Pushed in reverse so that slot 0 is handed out first.
			c.free[i] = uint32(n) - 1 - uint32(i)
		}
	}
	return p, nil
}

// Acquire leases a free cell of class. It never waits: with no free cell
// it returns [ErrNoFreeCell], and the caller waits on [FixedCellPool.Changed].
func (p *FixedCellPool) Acquire(class policy.CellClass) (*Lease, error) {
	if int(class) >= policy.NumCellClasses || p.config.Parallelism[class] == 0 {
		return nil, ErrClassNotPooled
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	c := &p.classes[class]
	n := len(c.free)
	if n == 0 {
		return nil, ErrNoFreeCell
	}
	index := c.free[n-1]
	c.free = c.free[:n-1]
	s := &c.slots[index]
	s.state = slotLeased
	l := &Lease{pool: p, cell: CellID{Class: class, Slot: index, Generation: s.generation}}
	l.state.Store(leaseHeld)
	return l, nil
}

// dispose ends a lease: the cell becomes free again or is quarantined. It
// reports false if the lease was already disposed of.
func (p *FixedCellPool) dispose(l *Lease, to uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !l.state.CompareAndSwap(leaseHeld, to) {
		return false
	}
	c := &p.classes[l.cell.Class]
	s := &c.slots[l.cell.Slot]
	if s.state != slotLeased || s.generation != l.cell.Generation {
		panic("cellpool: lease does not match its slot")
	}
	if to == leaseReleased {
		s.state = slotFree
		c.free = append(c.free, l.cell.Slot)
	} else {
		s.state = slotQuarantined
		c.quarantined++
	}
	p.signalLocked()
	return true
}

// Replenish puts a fresh cell into one quarantined slot of class, for
// example after the operator or a repair loop rebuilt its sandbox. The new
// cell has a new generation.
func (p *FixedCellPool) Replenish(class policy.CellClass) (CellID, error) {
	if int(class) >= policy.NumCellClasses || p.config.Parallelism[class] == 0 {
		return CellID{}, ErrClassNotPooled
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &p.classes[class]
	for i := range c.slots {
		s := &c.slots[i]
		if s.state != slotQuarantined {
			continue
		}
		s.state = slotFree
		s.generation++
		c.quarantined--
		c.free = append(c.free, uint32(i))
		p.signalLocked()
		return CellID{Class: class, Slot: uint32(i), Generation: s.generation}, nil
	}
	return CellID{}, ErrNothingQuarantined
}

// signalLocked wakes everyone waiting on Changed. A channel nobody was
// handed cannot have waiters, so it is kept, and a release costs no
// allocation while nobody watches. Called with p.mu held.
func (p *FixedCellPool) signalLocked() {
	if !p.watched {
		return
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.watched = false
}

// Changed returns a channel that is closed at the next change of the pool:
// a cell freed, quarantined or replenished. Take it before looking at the
// pool, so that a change in between is not missed.
func (p *FixedCellPool) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.watched = true
	return p.changed
}

// Close makes Acquire fail with [ErrClosed]. Leases still out can be
// released or quarantined as usual.
func (p *FixedCellPool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.signalLocked()
	}
}

// ClassStats is one class's cells by state. Usable is Configured minus
// Quarantined; Free plus Leased equals Usable.
type ClassStats struct {
	Configured  uint64
	Usable      uint64
	Free        uint64
	Leased      uint64
	Quarantined uint64
}

// Stats reports class's cells; an unpooled class reports zeros.
func (p *FixedCellPool) Stats(class policy.CellClass) ClassStats {
	if int(class) >= policy.NumCellClasses {
		return ClassStats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked(class)
}

// statsLocked is Stats with p.mu held.
func (p *FixedCellPool) statsLocked(class policy.CellClass) ClassStats {
	c := &p.classes[class]
	configured := uint64(len(c.slots))
	usable := configured - c.quarantined
	free := uint64(len(c.free))
	return ClassStats{Configured: configured, Usable: usable, Free: free, Leased: usable - free, Quarantined: c.quarantined}
}

// Free reports how many cells of class can be acquired now.
func (p *FixedCellPool) Free(class policy.CellClass) int {
	if int(class) >= policy.NumCellClasses {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0
	}
	return len(p.classes[class].free)
}

// Degraded reports whether class has fewer usable cells than configured,
// so that admission, which plans with the configured parallelism, would
// over-promise unless the load sample carries a conservative delay.
func (p *FixedCellPool) Degraded(class policy.CellClass) bool {
	s := p.Stats(class)
	return s.Usable < s.Configured
}

// QueueDelayFloor is the smallest observed queue delay that the node's load
// sample may carry for class while the pool and the configuration
// disagree: zero when they agree, the configured StopDelay (which no
// admission can meet) when the class has no usable cell.
func (p *FixedCellPool) QueueDelayFloor(class policy.CellClass) time.Duration {
	s := p.Stats(class)
	return p.config.conservativeDelay(s.Usable, s.Configured)
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}
