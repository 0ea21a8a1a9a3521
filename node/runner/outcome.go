package runner

import (
	"time"

	"latent.dev/admission/node/cellpool"
)

// Report is an activation's terminal report.
type Report struct {
	Outcome     Outcome
	Disposition Disposition
	Cell        cellpool.CellID
	Consumed    Consumption
	// Output is the guest's result for Succeeded and DeclaredError.
	Output []byte
}

// ExitKind is how a guest stopped, as its backend saw it.
type ExitKind uint8

// The exits a backend reports.
const (
	// ExitReturned: the guest returned a result.
	ExitReturned ExitKind = iota + 1
	// ExitDeclaredError: the guest returned an error its contract declares.
	ExitDeclaredError
	// ExitTrapped: the guest trapped (unreachable, bounds, stack...).
	ExitTrapped
	// ExitInterrupted: the backend stopped the guest because a charge was
	// refused or the context ended; the runner works out which.
	ExitInterrupted
	// ExitPlatformFailure: the backend itself failed (instantiation, host
	// error); the guest's result is unknown.
	ExitPlatformFailure
)

// Exit is what a backend returns once the guest has stopped: how, and
// what the guest consumed as the backend metered it against
// Guest.Budget.
type Exit struct {
	Kind   ExitKind
	Output []byte
	// Fuel is the CPU fuel the guest burned: at most the grant, which a
	// charge past it is capped at.
	Fuel uint64
	// PeakMemory is the most memory the guest held at once: at most the
	// grant, since growth past it is refused and not recorded.
	PeakMemory uint64
	// FuelExhausted and MemoryExhausted report a refused charge: fuel
	// past the grant, or memory growth past it. Either refusal is the
	// backend's signal to stop the guest, though a guest may handle a
	// refused memory growth and go on.
	FuelExhausted, MemoryExhausted bool
	// CellUncertain: the backend cannot vouch for the cell's state after
	// the guest (its cleanup was uncertain), and the runner quarantines
	// it. False releases the cell for reuse.
	CellUncertain bool
}

// Outcome is an activation's terminal outcome.
type Outcome uint8

// The outcomes. The zero value means the activation never ran (the
// scheduler dropped it; see the error).
const (
	NotRun Outcome = iota
	Succeeded
	DeclaredError
	Trapped
	DeadlineExceeded
	FuelExhausted
	MemoryExhausted
	Canceled
	PlatformFailure
	numOutcomes
)

// Outcomes lists the terminal outcomes an executed activation can end
// with, in order (NotRun, which no executed activation has, is left out).
func Outcomes() []Outcome {
	out := make([]Outcome, 0, numOutcomes-1)
	for o := Succeeded; o < numOutcomes; o++ {
		out = append(out, o)
	}
	return out
}

var outcomeNames = [numOutcomes]string{"not-run", "succeeded", "declared-error", "trapped", "deadline-exceeded",
	"fuel-exhausted", "memory-exhausted", "canceled", "platform-failure"}

func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "invalid-outcome"
}

var outcomeErrors = [numOutcomes]error{nil, nil, ErrDeclared, ErrTrapped, ErrDeadlineExceeded, ErrFuelExhausted,
	ErrMemoryExhausted, ErrCanceled, ErrPlatformFailure}

// Disposition is what became of the cell after the activation.
type Disposition uint8

// The dispositions.
const (
	// NoCell: the activation never held a cell.
	NoCell Disposition = iota
	// Released: the backend reset the cell and it is reusable.
	Released
	// Quarantined: the cell's state is uncertain and it left usable
	// capacity.
	Quarantined
)

func (d Disposition) String() string {
	switch d {
	case NoCell:
		return "no-cell"
	case Released:
		return "released"
	case Quarantined:
		return "quarantined"
	}
	return "invalid-disposition"
}

// Consumption is what one execution consumed, finalized when the guest
// stopped.
type Consumption struct {
	CPUFuel         uint64
	PeakMemoryBytes uint64
	// WallTime is the time from the start of execution to the guest's
	// stop. The deadline it is judged against is the permit's, bound at
	// admission, so queueing time counts against the grant too.
	WallTime time.Duration
}
