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
// passed.
type fuelClock struct {
	meter *runner.Meter
	rate  uint64 // fuel units per millisecond
	start time.Time
	timer *time.Timer
	fired chan struct{} // closed once the timer's charge and cancel are done
}

// startFuel starts metering now. The guest may run until its consumption
// would exceed the remaining fuel; then the timer charges the meter past
// the grant (the meter caps it and refuses: fuel exhausted) and cancels.
func startFuel(meter *runner.Meter, rate uint64, cancel context.CancelCauseFunc) *fuelClock {
	remaining := meter.RemainingFuel()
	c := &fuelClock{meter: meter, rate: rate, start: time.Now(), fired: make(chan struct{})}
	c.timer = time.AfterFunc(runTimeFor(remaining, rate), func() {
		defer close(c.fired)
		_ = meter.ChargeFuel(remaining)
		_ = meter.ChargeFuel(1)
		cancel(errFuelExhausted)
	})
	return c
}

// stop ends metering once the guest has stopped and charges the fuel it
// burned; a charge over the grant is refused, which tells the runner the
// guest overran.
func (c *fuelClock) stop() {
	if c.timer.Stop() {
		_ = c.meter.ChargeFuel(fuelFor(time.Since(c.start), c.rate))
		return
	}
	<-c.fired
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
