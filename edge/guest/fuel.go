package guest

import (
	"context"
	"math"
	"math/bits"
	"time"

	"latent.dev/admission/node/runner"
)

// DefaultFuelPerMillisecond is the fuel rate when Config names none: one
// fuel unit per nanosecond of execution time.
const DefaultFuelPerMillisecond = 1_000_000

// fuelClock meters a guest's execution time as fuel at a fixed rate. It
// charges the meter once, when the guest stops, and interrupts the guest
// (through cancel) the moment the time it may run at that rate has
// passed. A clock is kept with its run state (runState) and started
// again for each activation; its timer is made once.
type fuelClock struct {
	meter     *runner.Meter
	rate      uint64 // fuel units per millisecond
	remaining uint64 // the fuel left when the clock started
	cancel    context.CancelCauseFunc
	start     time.Time
	timer     *time.Timer
	// fired receives once from the timer's function, when its charge and
	// cancel are done; stop takes it, so that no timer of one activation
	// reaches into the next.
	fired chan struct{}
}

// begin starts metering now. The guest may run until its consumption
// would exceed the remaining fuel; then the timer charges the meter past
// the grant (the meter caps it and refuses: fuel exhausted) and cancels.
// The clock must be stopped (stop) before it begins again.
func (c *fuelClock) begin(meter *runner.Meter, rate uint64, cancel context.CancelCauseFunc) {
	c.meter, c.rate, c.cancel = meter, rate, cancel
	c.remaining = meter.RemainingFuel()
	c.start = time.Now()
	after := runTimeFor(c.remaining, rate)
	if c.timer == nil {
		c.fired = make(chan struct{}, 1)
		c.timer = time.AfterFunc(after, c.burnt)
		return
	}
	c.timer.Reset(after)
}

// burnt is the timer's function: the guest has run out of fuel.
func (c *fuelClock) burnt() {
	_ = c.meter.ChargeFuel(c.remaining)
	_ = c.meter.ChargeFuel(1)
	c.cancel(errFuelExhausted)
	c.fired <- struct{}{}
}

// stop ends metering once the guest has stopped and charges the fuel it
// burned; a charge over the grant is refused, which tells the runner the
// guest overran. When the timer has fired, stop waits for its function
// to finish.
func (c *fuelClock) stop() {
	if c.timer.Stop() {
		_ = c.meter.ChargeFuel(fuelFor(time.Since(c.start), c.rate))
	} else {
		<-c.fired
	}
	c.meter, c.cancel = nil, nil
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
