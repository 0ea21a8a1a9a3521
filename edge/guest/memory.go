package guest

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"

	"latent.dev/admission/node/runner"
)

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
// to the activation's meter, so the grant's memory bounds the guest to the
// page: a growth the meter refuses fails, and memory.grow returns -1 to
// the guest. The initial size was charged before instantiation (charged
// starts there). Only the instance's goroutine touches it.
type meteredMemory struct {
	meter   *runner.Meter
	pool    *memoryPool // where Allocate takes a kept array from
	max     uint64      // the most the module's memory type allows
	charged uint64      // bytes charged to the meter
	buffer  []byte
	box     *[]byte // what held a kept array in the pool, for recycle
	refused bool    // a growth was refused
	freed   bool    // the instance closed and gave the memory back
}

// reset readies m for one instance whose initial memory, charged
// already, is charged bytes.
func (m *meteredMemory) reset(meter *runner.Meter, pool *memoryPool, charged uint64) {
	*m = meteredMemory{meter: meter, pool: pool, charged: charged}
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
		if m.meter.GrowMemory(size-m.charged) != nil {
			m.refused = true
			return nil
		}
		m.charged = size
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
// memory goes back to the meter. The array stays with m until recycle.
func (m *meteredMemory) Free() {
	m.meter.ShrinkMemory(m.charged)
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
