package synthetic

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/runner"
)

// Behavior is what one synthetic guest does, in order: signal Started,
// panic if asked, grow memory, burn fuel, wait (Block, Hold, Duration),
// then exit with Exit. A refused charge or an ended context interrupts it.
type Behavior struct {
	// Exit is how the guest ends if nothing interrupts it; zero means
	// runner.ExitReturned.
	Exit   runner.ExitKind
	Output []byte
	// Fuel is charged in one step; more than the grant interrupts.
	Fuel uint64
	// Memory is grown in one step; more than the grant interrupts.
	Memory uint64
	// Block runs until the context ends (deadline or cancellation).
	Block bool
	// Hold, if not nil, runs until it is closed or the context ends.
	Hold <-chan struct{}
	// Duration runs this long unless the context ends first.
	Duration time.Duration
	// Started, if not nil, is called once the guest holds its cell.
	Started func()
	// UncertainCleanup makes the exit report the cell uncertain
	// (runner.Exit.CellUncertain), so the runner quarantines it.
	UncertainCleanup bool
	// Panic makes the backend panic inside Run.
	Panic bool
}

// Plan chooses the behavior of each guest.
type Plan func(g *runner.Guest) Behavior

// Backend is a synthetic runner.Backend. It is safe for concurrent use.
type Backend struct {
	plan Plan

	runs       atomic.Int64
	violations atomic.Int64

	// cells holds the state of every cell that has a guest now or whose
	// cleanup was uncertain; a cell in neither state has no entry. Each
	// change is one Compute, so a check and the change it guards happen
	// under the same bucket lock.
	cells *xsync.MapOf[cellpool.CellID, cellState]
}

type cellState struct {
	busy  bool // a guest runs on the cell now
	dirty bool // a guest's cleanup of the cell was uncertain
}

// New returns a backend that asks plan for each guest's behavior; a nil
// plan makes every guest return at once.
func New(plan Plan) *Backend {
	if plan == nil {
		plan = func(*runner.Guest) Behavior { return Behavior{} }
	}
	return &Backend{plan: plan, cells: xsync.NewMapOf[cellpool.CellID, cellState]()}
}

// Run follows the guest's behavior.
func (b *Backend) Run(ctx context.Context, g *runner.Guest) runner.Exit {
	beh := b.plan(g)
	b.runs.Add(1)
	b.enter(g.Cell)
	finished := false
	defer func() { b.leave(g.Cell, beh.UncertainCleanup || !finished) }()
	if beh.Started != nil {
		beh.Started()
	}
	if beh.Panic {
		panic("synthetic: injected backend panic")
	}
	exit := b.follow(ctx, g, &beh)
	exit.CellUncertain = beh.UncertainCleanup
	finished = true
	return exit
}

func (b *Backend) follow(ctx context.Context, g *runner.Guest, beh *Behavior) runner.Exit {
	// Charged against the grant as a backend meters: memory growth past
	// it is refused and not recorded, fuel past it is capped there.
	var used runner.Exit
	interrupted := func() runner.Exit {
		used.Kind = runner.ExitInterrupted
		return used
	}
	if beh.Memory > g.Budget.MemoryBytes {
		used.MemoryExhausted = true
		return interrupted()
	}
	used.PeakMemory = beh.Memory
	if beh.Fuel > g.Budget.CPUFuel {
		used.Fuel, used.FuelExhausted = g.Budget.CPUFuel, true
		return interrupted()
	}
	used.Fuel = beh.Fuel
	if beh.Block {
		<-ctx.Done()
		return interrupted()
	}
	if beh.Hold != nil {
		select {
		case <-beh.Hold:
		case <-ctx.Done():
			return interrupted()
		}
	}
	if beh.Duration > 0 {
		t := time.NewTimer(beh.Duration)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return interrupted()
		}
	}
	kind := beh.Exit
	if kind == 0 {
		kind = runner.ExitReturned
	}
	used.Kind, used.Output = kind, beh.Output
	return used
}

func (b *Backend) enter(cell cellpool.CellID) {
	b.cells.Compute(cell, func(s cellState, _ bool) (cellState, bool) {
		if s.busy || s.dirty {
			b.violations.Add(1)
		}
		s.busy = true
		return s, false
	})
}

func (b *Backend) leave(cell cellpool.CellID, uncertain bool) {
	b.cells.Compute(cell, func(s cellState, _ bool) (cellState, bool) {
		s.busy = false
		s.dirty = s.dirty || uncertain
		return s, !s.dirty
	})
}

// Runs is the number of guests started.
func (b *Backend) Runs() int64 { return b.runs.Load() }

// Violations is the number of guests that started on a busy cell or on a
// cell that should have been quarantined.
func (b *Backend) Violations() int64 { return b.violations.Load() }

// ByInput is a plan that looks each guest's input up in behaviors; an
// input not listed returns at once.
func ByInput(behaviors map[string]Behavior) Plan {
	return func(g *runner.Guest) Behavior { return behaviors[string(g.Input)] }
}
