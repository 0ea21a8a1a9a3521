package runner

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestMeterFuel(t *testing.T) {
	t.Run("a charge that reaches the grant exactly is accepted", func(t *testing.T) {
		m := newMeter(10, 0, time.Time{})
		if err := m.ChargeFuel(10); err != nil {
			t.Fatal(err)
		}
		if m.RemainingFuel() != 0 {
			t.Fatalf("remaining %d", m.RemainingFuel())
		}
		if fuel, _ := m.exhausted(); fuel {
			t.Fatal("exhausted at equality")
		}
	})
	t.Run("a charge past the grant is refused and caps usage", func(t *testing.T) {
		m := newMeter(10, 0, time.Time{})
		_ = m.ChargeFuel(4)
		if err := m.ChargeFuel(7); !errors.Is(err, ErrFuelExhausted) {
			t.Fatalf("got %v", err)
		}
		if u := m.consumption(0); u.CPUFuel != 10 {
			t.Fatalf("usage %d, want capped at the grant", u.CPUFuel)
		}
	})
	t.Run("exhaustion is sticky", func(t *testing.T) {
		m := newMeter(10, 0, time.Time{})
		_ = m.ChargeFuel(11)
		if err := m.ChargeFuel(0); !errors.Is(err, ErrFuelExhausted) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a huge charge does not wrap", func(t *testing.T) {
		m := newMeter(10, 0, time.Time{})
		_ = m.ChargeFuel(5)
		if err := m.ChargeFuel(math.MaxUint64); !errors.Is(err, ErrFuelExhausted) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestMeterMemory(t *testing.T) {
	m := newMeter(0, 100, time.Time{})
	if err := m.GrowMemory(60); err != nil {
		t.Fatal(err)
	}
	m.ShrinkMemory(50)
	if err := m.GrowMemory(90); err != nil {
		t.Fatalf("growth back to the grant: %v", err)
	}
	if err := m.GrowMemory(1); !errors.Is(err, ErrMemoryExhausted) {
		t.Fatalf("got %v", err)
	}
	m.ShrinkMemory(math.MaxUint64)
	if u := m.consumption(0); u.PeakMemoryBytes != 100 {
		t.Fatalf("peak %d", u.PeakMemoryBytes)
	}
	if err := m.GrowMemory(math.MaxUint64); !errors.Is(err, ErrMemoryExhausted) {
		t.Fatalf("got %v", err)
	}
}

func TestMeterUsageNeverNegative(t *testing.T) {
	m := newMeter(1, 1, time.Time{})
	if u := m.consumption(-time.Second); u.WallTime != 0 {
		t.Fatalf("wall %v after the clock went backwards", u.WallTime)
	}
}

func TestClassify(t *testing.T) {
	deadline := time.Unix(1000, 0)
	before, after := deadline.Add(-time.Millisecond), deadline
	tests := []struct {
		name      string
		exit      ExitKind
		fuelOut   bool
		memoryOut bool
		canceled  bool
		stopped   time.Time
		want      Outcome
	}{
		{"a return before the deadline succeeds", ExitReturned, false, false, false, before, Succeeded},
		{"a declared error is the guest's answer", ExitDeclaredError, false, false, false, before, DeclaredError},
		{"a trap", ExitTrapped, false, false, false, before, Trapped},
		{"a return exactly at the deadline is late", ExitReturned, false, false, false, after, DeadlineExceeded},
		{"a trap after the deadline is late", ExitTrapped, false, false, false, after, DeadlineExceeded},
		{"a return after a refused fuel charge overran", ExitReturned, true, false, false, before, FuelExhausted},
		{"a handled memory refusal does not spoil success", ExitReturned, false, true, false, before, Succeeded},
		{"interrupted by fuel", ExitInterrupted, true, false, false, before, FuelExhausted},
		{"interrupted by the deadline", ExitInterrupted, false, false, true, after, DeadlineExceeded},
		{"interrupted by memory", ExitInterrupted, false, true, false, before, MemoryExhausted},
		{"interrupted by cancellation", ExitInterrupted, false, false, true, before, Canceled},
		{"interrupted for no reason is a platform failure", ExitInterrupted, false, false, false, before, PlatformFailure},
		{"platform failure", ExitPlatformFailure, false, false, false, before, PlatformFailure},
		{"an unknown exit is a platform failure", ExitKind(99), false, false, false, before, PlatformFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMeter(1, 1, deadline)
			m.fuelOut, m.memoryOut = tt.fuelOut, tt.memoryOut
			if got := classify(Exit{Kind: tt.exit}, m, tt.canceled, tt.stopped); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOutcomeVocabulary(t *testing.T) {
	for o := NotRun; o < numOutcomes; o++ {
		if o.String() == "" || o.String() == "invalid-outcome" {
			t.Errorf("outcome %d has no name", o)
		}
		if (outcomeErrors[o] == nil) != (o == NotRun || o == Succeeded) {
			t.Errorf("outcome %v error %v", o, outcomeErrors[o])
		}
	}
	if numOutcomes.String() != "invalid-outcome" || Disposition(9).String() != "invalid-disposition" {
		t.Error("out-of-range values must print as invalid")
	}
}
