package guest

import (
	"math"
	"testing"
	"time"
)

func TestFuelFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		rate uint64
		want uint64
	}{
		{"no time costs nothing", 0, DefaultFuelPerMillisecond, 0},
		{"a negative duration costs nothing", -time.Second, DefaultFuelPerMillisecond, 0},
		{"the default rate is one unit per nanosecond", 1234567 * time.Nanosecond, DefaultFuelPerMillisecond, 1234567},
		{"a part of a unit rounds up", time.Nanosecond, 1, 1},
		{"a whole millisecond at one per millisecond is one", time.Millisecond, 1, 1},
		{"just past a millisecond at one per millisecond is two", time.Millisecond + 1, 1, 2},
		{"an overflowing product saturates", math.MaxInt64, math.MaxUint64, math.MaxUint64},
		{"the largest duration at the default rate fits", math.MaxInt64, DefaultFuelPerMillisecond, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fuelFor(tc.d, tc.rate); got != tc.want {
				t.Fatalf("fuelFor(%v, %d) = %d, want %d", tc.d, tc.rate, got, tc.want)
			}
		})
	}
}

func TestRunTimeForIsTheFirstInstantOverTheGrant(t *testing.T) {
	for _, tc := range []struct {
		fuel, rate uint64
	}{
		{0, DefaultFuelPerMillisecond}, {1, DefaultFuelPerMillisecond}, {200_000_000, DefaultFuelPerMillisecond},
		{0, 1}, {1, 1}, {7, 3}, {1000, 999_999}, {math.MaxUint32, 7}, {123456789, 1_000_001},
	} {
		d := runTimeFor(tc.fuel, tc.rate)
		if got := fuelFor(d, tc.rate); got <= tc.fuel {
			t.Errorf("fuel %d rate %d: at %v the guest has burnt %d, not more than its grant", tc.fuel, tc.rate, d, got)
		}
		if got := fuelFor(d-1, tc.rate); got > tc.fuel {
			t.Errorf("fuel %d rate %d: at %v the guest had already burnt %d", tc.fuel, tc.rate, d-1, got)
		}
	}
}

func TestRunTimeForSaturates(t *testing.T) {
	if d := runTimeFor(math.MaxUint64, 1); d != math.MaxInt64 {
		t.Fatalf("runTimeFor(max, 1) = %v", d)
	}
	if d := runTimeFor(math.MaxUint64, DefaultFuelPerMillisecond); d != math.MaxInt64 {
		t.Fatalf("runTimeFor(max, default) = %v", d)
	}
}

// TestFuelChargeHoldsTheGrant: a charge up to the grant exactly is
// accepted; past it, it is refused and the total capped at the grant,
// without wrapping.
func TestFuelChargeHoldsTheGrant(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         uint64
		burned    uint64
		exhausted bool
	}{
		{"a charge that reaches the grant exactly is accepted", 10, 10, false},
		{"a charge below it is recorded", 4, 4, false},
		{"a charge past it is refused and capped", 11, 10, true},
		{"a huge charge does not wrap", math.MaxUint64, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fuelClock{grant: 10}
			c.charge(tc.n)
			if c.burned != tc.burned || c.exhausted != tc.exhausted {
				t.Fatalf("charge(%d): burned %d, exhausted %v; want %d, %v", tc.n, c.burned, c.exhausted, tc.burned, tc.exhausted)
			}
		})
	}
}

// TestMeteredMemoryHoldsTheGrant: growth up to the grant exactly is
// accepted and recorded as the peak; growth past it is refused, not
// recorded, and remembered.
func TestMeteredMemoryHoldsTheGrant(t *testing.T) {
	const page = 65536
	var m meteredMemory
	m.reset(3*page, &memoryPool{}, page)
	m.Allocate(page, 10*page)
	if got := m.Reallocate(page); len(got) != page {
		t.Fatalf("the initial page: %d bytes", len(got))
	}
	if got := m.Reallocate(3 * page); len(got) != 3*page || m.refused {
		t.Fatalf("growth to the grant exactly: %d bytes, refused %v", len(got), m.refused)
	}
	if got := m.Reallocate(4 * page); got != nil || !m.refused {
		t.Fatalf("growth past the grant: %d bytes, refused %v", len(got), m.refused)
	}
	if m.peak != 3*page || m.charged != 3*page {
		t.Fatalf("peak %d, charged %d after a refused growth; want both %d", m.peak, m.charged, 3*page)
	}
	m.Free()
	if m.peak != 3*page || m.charged != 0 {
		t.Fatalf("after Free: peak %d, charged %d", m.peak, m.charged)
	}
}
