package guest

import (
	"github.com/tetratelabs/wazero/experimental"

	"latent.dev/admission/node/runner"
)

// meteredMemory backs one instance's linear memory and charges its growth
// to the activation's meter, so the grant's memory bounds the guest to the
// page: a growth the meter refuses fails, and memory.grow returns -1 to
// the guest. The initial size was charged before instantiation (charged
// starts there). Only the instance's goroutine touches it.
type meteredMemory struct {
	meter   *runner.Meter
	max     uint64 // the most the module's memory type allows
	charged uint64 // bytes charged to the meter
	buffer  []byte
	refused bool // a growth was refused
}

func newMeteredMemory(meter *runner.Meter, charged uint64) *meteredMemory {
	return &meteredMemory{meter: meter, charged: charged}
}

// Allocate implements experimental.MemoryAllocator: the instance has one
// memory (a WASI command's), so it hands out itself. The capacity hint
// is capped by what was charged: nothing beyond the grant is reserved.
func (m *meteredMemory) Allocate(capacity, max uint64) experimental.LinearMemory {
	m.max = max
	m.buffer = make([]byte, 0, min(capacity, m.charged))
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
// memory goes back to the meter.
func (m *meteredMemory) Free() {
	m.meter.ShrinkMemory(m.charged)
	m.charged = 0
	m.buffer = nil
}
