package runner

import (
	"math"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// TestMeteredHoldsTheReportToTheGrant: a backend's report at the grant
// stands; past it, it is capped at the grant and counts as a refused
// charge, as a meter would have refused it.
func TestMeteredHoldsTheReportToTheGrant(t *testing.T) {
	grant := policy.Budget{CPUFuel: 10, MemoryBytes: 100}
	for _, tt := range []struct {
		name     string
		in, want Exit
	}{
		{"a report at the grant exactly stands", Exit{Fuel: 10, PeakMemory: 100}, Exit{Fuel: 10, PeakMemory: 100}},
		{"fuel past the grant is capped and refused", Exit{Fuel: 11}, Exit{Fuel: 10, FuelExhausted: true}},
		{"a huge fuel report does not wrap", Exit{Fuel: math.MaxUint64}, Exit{Fuel: 10, FuelExhausted: true}},
		{"memory past the grant is capped and refused", Exit{PeakMemory: 101}, Exit{PeakMemory: 100, MemoryExhausted: true}},
		{"a refusal the backend reported stays", Exit{Fuel: 10, FuelExhausted: true, MemoryExhausted: true},
			Exit{Fuel: 10, FuelExhausted: true, MemoryExhausted: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			metered(&got, &grant)
			if got.Fuel != tt.want.Fuel || got.PeakMemory != tt.want.PeakMemory ||
				got.FuelExhausted != tt.want.FuelExhausted || got.MemoryExhausted != tt.want.MemoryExhausted {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
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
			exit := Exit{Kind: tt.exit, FuelExhausted: tt.fuelOut, MemoryExhausted: tt.memoryOut}
			if got := classify(&exit, deadline, tt.canceled, tt.stopped); got != tt.want {
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
