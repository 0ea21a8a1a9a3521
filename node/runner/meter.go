package runner

import (
	"sync"
	"time"
)

// Meter accounts one execution against the permit's effective budget: it
// is initialized from the grant, never from a fresh wall-time allowance,
// and its deadline is the permit's. A backend charges fuel and memory as
// the guest consumes them and stops the guest when a charge is refused.
// A Meter is safe for concurrent use by the guest's threads; the backend
// must not use it after Run returns.
//
// A Meter must not be copied after first use.
type Meter struct {
	noCopy noCopy

	fuelLimit   uint64
	memoryLimit uint64
	deadline    time.Time

	mu        sync.Mutex
	fuel      uint64 // guarded by mu
	memory    uint64 // guarded by mu
	peak      uint64 // guarded by mu
	fuelOut   bool   // guarded by mu; a fuel charge was refused
	memoryOut bool   // guarded by mu; a memory growth was refused
}

func newMeter(fuel, memory uint64, deadline time.Time) *Meter {
	return &Meter{fuelLimit: fuel, memoryLimit: memory, deadline: deadline}
}

// ChargeFuel records n units of fuel. A charge that would take the total
// above the grant is refused with ErrFuelExhausted and the total is
// capped at the grant: the guest must stop. Every later charge is refused
// too.
func (m *Meter) ChargeFuel(n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fuelOut {
		return ErrFuelExhausted
	}
	if n > m.fuelLimit-m.fuel {
		m.fuel = m.fuelLimit
		m.fuelOut = true
		return ErrFuelExhausted
	}
	m.fuel += n
	return nil
}

// GrowMemory records n more bytes of guest memory. Growth beyond the grant
// is refused with ErrMemoryExhausted and not recorded; the guest may
// handle the refusal, or the backend interrupts it.
func (m *Meter) GrowMemory(n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n > m.memoryLimit-m.memory {
		m.memoryOut = true
		return ErrMemoryExhausted
	}
	m.memory += n
	m.peak = max(m.peak, m.memory)
	return nil
}

// ShrinkMemory records n bytes of guest memory given back.
func (m *Meter) ShrinkMemory(n uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.memory -= min(n, m.memory)
}

// RemainingFuel is the fuel the guest may still burn.
func (m *Meter) RemainingFuel() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fuelLimit - m.fuel
}

// Deadline is the permit's deadline, bound at admission and never reset.
func (m *Meter) Deadline() time.Time { return m.deadline }

func (m *Meter) exhausted() (fuel, memory bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fuelOut, m.memoryOut
}

func (m *Meter) consumption(wall time.Duration) Consumption {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Consumption{CPUFuel: m.fuel, PeakMemoryBytes: m.peak, WallTime: max(wall, 0)}
}
