package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"latent.dev/admission/catalog"
	"latent.dev/admission/node/runner"
)

// Run implements runner.Backend: it instantiates the module that g's
// revision's release names in g's deployment, with g.Input as standard
// input, calls _start under the grant's memory, the context's deadline
// and the fuel clock, and closes the instance before returning.
func (b *Backend) Run(ctx context.Context, g *runner.Guest) runner.Exit {
	if g == nil {
		return runner.Exit{Kind: runner.ExitPlatformFailure}
	}
	m := b.acquire(catalog.DeploymentKey{Tenant: g.Revision.Tenant, Service: g.Revision.Service}, g.Revision.Release)
	if m == nil {
		return runner.Exit{Kind: runner.ExitPlatformFailure}
	}
	defer b.release(m)
	exit, clean := b.execute(ctx, m, g)
	// A cell is clean once its guest's instance closed without error.
	// Every instance is fresh, so nothing of a guest survives it in the
	// cell.
	exit.CellUncertain = !clean
	return exit
}

// execute runs one instance of m to its end, metered against g.Budget:
// the exit carries the fuel the clock burned and the memory's peak, and
// which of them refused a charge. clean is false when the instance could
// not be closed cleanly.
func (b *Backend) execute(ctx context.Context, m *module, g *runner.Guest) (exit runner.Exit, clean bool) {
	interrupted := runner.Exit{Kind: runner.ExitInterrupted}
	if m.minMemory > g.Budget.MemoryBytes {
		// The module's initial memory alone is over the grant.
		return runner.Exit{Kind: runner.ExitInterrupted, MemoryExhausted: true}, true
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rs := b.takeRun()
	rs.begin(runCtx, cancel, g, b.maxOutput, &b.memories, m.minMemory)
	defer func() {
		// The clock has stopped and the instance is closed (or its close
		// failed): what they metered is final.
		exit.Fuel, exit.FuelExhausted = rs.fuel.burned, rs.fuel.exhausted
		exit.PeakMemory, exit.MemoryExhausted = rs.memory.peak, rs.memory.refused
		// Only a run state whose instance closed cleanly is used again:
		// nothing of that instance can reach it any more.
		if clean && !b.closing.Load() {
			rs.end()
			b.runs.Put(rs)
		}
	}()
	// Instantiating is part of the activation: its time burns the fuel,
	// and wazero, which does not interrupt an instantiation, is not asked
	// to run _start once the run's context has ended (the module limits
	// keep an instantiation to milliseconds: see InstanceCeilingBytes).
	rs.fuel.begin(g.Budget.CPUFuel, b.fuelRate, cancel)
	inst, err := b.runtime.InstantiateModule(experimental.WithMemoryAllocator(runCtx, &rs.memory), m.compiled, rs.config)
	if err == nil && runCtx.Err() != nil {
		rs.fuel.stop()
		return interrupted, inst.Close(context.WithoutCancel(ctx)) == nil
	}
	if err != nil {
		rs.fuel.stop()
		switch {
		case rs.memory.refused || runCtx.Err() != nil:
			return interrupted, true
		case b.closing.Load():
			return runner.Exit{Kind: runner.ExitPlatformFailure}, true
		}
		// Imports were resolved at deploy and a start section refused, so
		// what fails here is the module's own initialization (a data or
		// element segment out of bounds): the guest's fault.
		return runner.Exit{Kind: runner.ExitTrapped}, true
	}
	_, err = inst.ExportedFunction("_start").Call(runCtx)
	rs.fuel.stop()
	// Closing frees the memory.
	clean = inst.Close(context.WithoutCancel(ctx)) == nil
	if b.closing.Load() {
		// The backend's Close may have ended the guest; what it said
		// cannot be trusted.
		return runner.Exit{Kind: runner.ExitPlatformFailure}, clean
	}
	return b.exit(runCtx, err, &rs.memory, &rs.out), clean
}

// exit turns how _start ended into the runner's exit kind.
func (b *Backend) exit(runCtx context.Context, err error, memory *meteredMemory, out *boundedOutput) runner.Exit {
	exitErr, isExit := err.(*sys.ExitError) // as wazero returns it
	if !isExit && err != nil {
		isExit = errors.As(err, &exitErr)
	}
	switch {
	case err == nil || (isExit && exitErr.ExitCode() == 0):
		if out.overflow {
			return runner.Exit{Kind: runner.ExitTrapped}
		}
		return runner.Exit{Kind: runner.ExitReturned, Output: out.buffer}
	case out.overflow:
		return runner.Exit{Kind: runner.ExitTrapped}
	case runCtx.Err() != nil && isExit && closedByContext(exitErr.ExitCode()):
		// Deadline, cancellation or fuel: the runner tells them apart
		// from the refused charges and the clock.
		return runner.Exit{Kind: runner.ExitInterrupted}
	case memory.refused:
		// The guest died of a refused memory growth, whether it trapped or
		// exited (Go's runtime exits 2 when out of memory).
		return runner.Exit{Kind: runner.ExitInterrupted}
	case isExit:
		return runner.Exit{Kind: runner.ExitDeclaredError, Output: out.buffer}
	}
	return runner.Exit{Kind: runner.ExitTrapped}
}

func closedByContext(code uint32) bool {
	return code == sys.ExitCodeContextCanceled || code == sys.ExitCodeDeadlineExceeded
}

// runState is what one instance runs with, kept across activations
// (Backend.runs) so that an activation builds neither its module
// configuration nor its fuel clock anew: the configuration, built once,
// reads standard input from stdin, writes standard output to out and
// sleeps until ctx ends, and each activation resets those (begin). Only
// the instance's goroutine uses a run state, and it goes back to the
// pool only once its instance has closed cleanly (end).
type runState struct {
	config wazero.ModuleConfig
	stdin  bytes.Reader
	out    boundedOutput
	memory meteredMemory
	fuel   fuelClock
	// ctx is the run's context: a guest's nanosleep ends with it.
	ctx context.Context
}

func newRunState() *runState {
	rs := &runState{}
	rs.config = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdin(&rs.stdin).
		WithStdout(&rs.out).
		WithStderr(io.Discard).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(rs.sleep).
		WithRandSource(rand.Reader)
	return rs
}

// takeRun is a kept run state, or a new one.
func (b *Backend) takeRun() *runState {
	if rs, _ := b.runs.Get().(*runState); rs != nil {
		return rs
	}
	return newRunState()
}

// begin readies rs for one activation of g under runCtx, whose initial
// memory (charged already, within the grant) is charged bytes.
func (rs *runState) begin(runCtx context.Context, cancel context.CancelCauseFunc, g *runner.Guest, maxOutput int64,
	memories *memoryPool, charged uint64) {
	rs.ctx = runCtx
	rs.stdin.Reset(g.Input)
	rs.out = boundedOutput{limit: maxOutput, cancel: cancel}
	rs.memory.reset(g.Budget.MemoryBytes, memories, charged)
}

// end drops what rs holds of the activation that ran, handing its
// memory's array to the pool, once its instance has closed.
func (rs *runState) end() {
	rs.memory.recycle()
	rs.memory = meteredMemory{}
	rs.stdin.Reset(nil)
	rs.out = boundedOutput{}
	rs.ctx = nil
}

// sleep is the guests' nanosleep: real time, but never past the run's
// end, so a sleeping guest cannot hold its cell beyond its deadline or
// fuel.
func (rs *runState) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(min(ns, math.MaxInt64)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-rs.ctx.Done():
	}
}

// boundedOutput collects a guest's standard output up to a limit. The
// first write that would pass it is refused (the guest sees an I/O
// error), the output so far is discarded, and the guest is interrupted:
// a response over the bound is a broken response, never a truncated one.
// Only the instance's goroutine writes to it.
type boundedOutput struct {
	limit    int64
	cancel   context.CancelCauseFunc
	buffer   []byte
	overflow bool
}

// firstOutputBytes is the capacity of a guest's output at its first write
// (or the write's length, if longer; never past the limit).
const firstOutputBytes = 64

func (o *boundedOutput) Write(p []byte) (int, error) {
	if o.overflow || int64(len(p)) > o.limit-int64(len(o.buffer)) {
		o.overflow = true
		o.buffer = nil
		o.cancel(errOutputTooLarge)
		return 0, errOutputTooLarge
	}
	if o.buffer == nil {
		// One allocation for a short answer written in pieces.
		o.buffer = make([]byte, 0, min(max(int64(len(p)), firstOutputBytes), o.limit))
	}
	o.buffer = append(o.buffer, p...)
	return len(p), nil
}

// RetainedMemoryBytes is the largest guest linear memory whose backing
// array the backend keeps for the next instance once its instance has
// closed (see memoryPool): a guest that ends with at most this much
// memory hands its array on, cleared, and the next guest starts in it
// instead of in a fresh allocation. Larger arrays go back to the
// collector. The kept arrays are host memory that no grant sees; there
// are at most as many as guests ran at once, and the collector reclaims
// them once they stay unused (sync.Pool).
const RetainedMemoryBytes = 1 << 20

// memoryPool keeps the backing arrays of ended guests' linear memories,
// each at most RetainedMemoryBytes long and zero from its first byte to
// its capacity: a guest never sees another guest's bytes.
type memoryPool struct {
	pool   sync.Pool
	reused atomic.Uint64 // arrays handed out again, for the tests
}

// get is a zero-length array, all zero, of capacity at least want, or nil
// when none is kept; a kept array that is too short is dropped. box is
// what held it in the pool, for put to hold the next one in.
func (p *memoryPool) get(want uint64) (buffer []byte, box *[]byte) {
	box, _ = p.pool.Get().(*[]byte)
	if box == nil || uint64(cap(*box)) < want {
		return nil, box
	}
	p.reused.Add(1)
	buffer, *box = (*box)[:0], nil
	return buffer, box
}

// put keeps buffer, a guest memory whose instance has closed, clearing
// every byte the guest could have reached: its length, which only ever
// grew. The bytes past it were never handed out since the array was last
// zero, so the whole array is zero again. box, when not nil, holds it.
func (p *memoryPool) put(buffer []byte, box *[]byte) {
	if cap(buffer) == 0 || cap(buffer) > RetainedMemoryBytes {
		return
	}
	clear(buffer)
	if box == nil {
		box = new([]byte)
	}
	*box = buffer[:0]
	p.pool.Put(box)
}

// meteredMemory backs one instance's linear memory and charges its growth
// against the activation's memory grant, so the grant bounds the guest to
// the page: a growth past it is refused and not recorded, it fails, and
// memory.grow returns -1 to the guest. The initial size was charged
// before instantiation (charged starts there). Only the instance's
// goroutine touches it.
type meteredMemory struct {
	limit   uint64      // the grant's memory
	pool    *memoryPool // where Allocate takes a kept array from
	max     uint64      // the most the module's memory type allows
	charged uint64      // bytes charged against the grant, until Free
	peak    uint64      // the most ever charged at once
	buffer  []byte
	box     *[]byte // what held a kept array in the pool, for recycle
	refused bool    // a growth was refused
	freed   bool    // the instance closed and gave the memory back
}

// reset readies m for one instance held to limit bytes, whose initial
// memory, charged already, is charged bytes.
func (m *meteredMemory) reset(limit uint64, pool *memoryPool, charged uint64) {
	*m = meteredMemory{limit: limit, pool: pool, charged: charged, peak: charged}
}

// Allocate implements experimental.MemoryAllocator: the instance has one
// memory (a WASI command's), so it hands out itself. The capacity hint
// is capped by what was charged: nothing beyond the grant is reserved.
// A kept array long enough is taken from the pool before a new one is
// made.
func (m *meteredMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	m.max = max
	want := min(capacity, m.charged)
	if m.buffer, m.box = m.pool.get(want); m.buffer == nil {
		m.buffer = make([]byte, 0, want)
	}
	return m
}

// Reallocate implements experimental.LinearMemory. WebAssembly memory
// never shrinks, so size is never below the current length.
func (m *meteredMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size > m.charged {
		if size > m.limit {
			m.refused = true
			return nil
		}
		m.charged = size
		m.peak = max(m.peak, size)
	}
	if size <= uint64(cap(m.buffer)) {
		// Past the old length the array is zero: a fresh array is, and a
		// kept one was cleared to its capacity.
		m.buffer = m.buffer[:size]
		return m.buffer
	}
	// Grow the backing array geometrically, as append does, so a guest
	// growing page by page costs amortized linear copying; the slack past
	// size is host memory only (at most as much again as the guest holds,
	// and never past the module's maximum), never visible to the guest or
	// charged to it.
	grown := make([]byte, size, max(size, min(2*uint64(cap(m.buffer)), m.max)))
	copy(grown, m.buffer)
	m.buffer = grown
	return m.buffer
}

// Free implements experimental.LinearMemory: the instance closed, and its
// memory is given back. The array stays with m until recycle.
func (m *meteredMemory) Free() {
	m.charged = 0
	m.freed = true
}

// recycle hands the array to the pool, cleared, once the instance has
// closed cleanly: called on the instance's goroutine after Close
// returned, so no guest can reach it any more. An array whose instance
// did not give it back is left to the collector.
func (m *meteredMemory) recycle() {
	buffer, box := m.buffer, m.box
	m.buffer, m.box = nil, nil
	if m.freed {
		m.pool.put(buffer, box)
	}
}

// DefaultFuelPerMillisecond is the fuel rate when Config names none: one
// fuel unit per nanosecond of execution time.
const DefaultFuelPerMillisecond = 1_000_000

// fuelClock meters a guest's execution time as fuel at a fixed rate
// against the activation's fuel grant. It charges once, when the guest
// stops, and interrupts the guest (through cancel) the moment the time it
// may run at that rate has passed. A clock is kept with its run state
// (runState) and started again for each activation; its timer is made
// once.
type fuelClock struct {
	rate   uint64 // fuel units per millisecond
	grant  uint64 // the fuel the guest may burn
	cancel context.CancelCauseFunc
	start  time.Time
	timer  *time.Timer
	// burned is the fuel charged, at most the grant, and exhausted
	// whether a charge past the grant was refused (burned then capped at
	// the grant). The timer's function writes them before it sends on
	// fired, and stop, which takes fired, writes them otherwise: once
	// stop returns they are final and the instance's goroutine reads
	// them.
	burned    uint64
	exhausted bool
	// fired receives once from the timer's function, when its charge and
	// cancel are done; stop takes it, so that no timer of one activation
	// reaches into the next.
	fired chan struct{}
}

// begin starts metering now against grant. The guest may run until its
// consumption would exceed the grant; then the timer charges past it
// (refused and capped at the grant: fuel exhausted) and cancels. The
// clock must be stopped (stop) before it begins again.
func (c *fuelClock) begin(grant, rate uint64, cancel context.CancelCauseFunc) {
	c.grant, c.rate, c.cancel = grant, rate, cancel
	c.burned, c.exhausted = 0, false
	c.start = time.Now()
	after := runTimeFor(grant, rate)
	if c.timer == nil {
		c.fired = make(chan struct{}, 1)
		c.timer = time.AfterFunc(after, c.burnt)
		return
	}
	c.timer.Reset(after)
}

// burnt is the timer's function: the guest has run out of fuel.
func (c *fuelClock) burnt() {
	c.burned, c.exhausted = c.grant, true
	c.cancel(errFuelExhausted)
	c.fired <- struct{}{}
}

// stop ends metering once the guest has stopped and charges the fuel it
// burned; a charge over the grant is refused and capped at it, which
// tells the runner the guest overran. When the timer has fired, stop
// waits for its function to finish.
func (c *fuelClock) stop() {
	if c.timer.Stop() {
		c.charge(fuelFor(time.Since(c.start), c.rate))
	} else {
		<-c.fired
	}
	c.cancel = nil
}

// charge records n units burned: up to the grant exactly they are
// charged, past it the charge is refused and the total capped at the
// grant.
func (c *fuelClock) charge(n uint64) {
	if n > c.grant {
		c.burned, c.exhausted = c.grant, true
		return
	}
	c.burned = n
}

// fuelFor is the fuel d of execution costs at rate per millisecond,
// rounded up, saturating at the largest value.
func fuelFor(d time.Duration, rate uint64) uint64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), rate)
	if hi >= uint64(time.Millisecond) {
		return math.MaxUint64
	}
	q, r := bits.Div64(hi, lo, uint64(time.Millisecond))
	if r != 0 {
		if q == math.MaxUint64 {
			return q
		}
		q++
	}
	return q
}

// runTimeFor is the shortest execution time whose fuel exceeds fuel: the
// moment a guest with fuel left must be stopped. It saturates at the
// largest duration.
func runTimeFor(fuel, rate uint64) time.Duration {
	// fuelFor(t) > fuel  ⟺  t·rate > fuel·10⁶  ⟺  t > ⌊fuel·10⁶ / rate⌋.
	hi, lo := bits.Mul64(fuel, uint64(time.Millisecond))
	if hi >= rate {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, rate)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q + 1)
}
