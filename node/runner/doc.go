// Package runner executes started activations on leased cells through a
// [Backend], enforcing the permit's obligations and budget, and ends each
// one in a fixed order: the guest stops, accounting is finalized, the
// cell is released or quarantined, the execution permit is released, and
// only then is the caller told.
//
// # Accounting
//
// A backend meters the guest against the permit's effective budget
// ([Guest.Budget]): CPU fuel and memory limits are the grant's, and the
// deadline ([Guest.Deadline]) is the permit's, bound once at admission
// and never reset at dequeue, so time spent queued counts against the
// wall-time grant. The backend charges fuel and memory as the guest
// consumes them, where it sees them consumed; a refused charge is the
// signal to stop the guest. The deadline reaches the backend as the
// context's deadline. The backend reports what the guest consumed and
// which charges it refused in its [Exit]; the runner holds the report to
// the grant (fuel past it is capped and counts as refused) and adds the
// wall time it measured itself.
//
// # Outcomes
//
// The backend reports how the guest stopped ([ExitKind]); the runner
// decides the [Outcome]:
//
//	exit                         outcome
//	returned / declared / trap   fuel-exhausted if a fuel charge was refused,
//	                             else deadline-exceeded if at/after the deadline,
//	                             else succeeded / declared-error / trapped
//	interrupted                  fuel-exhausted, deadline-exceeded,
//	                             memory-exhausted, canceled (first that holds),
//	                             else platform-failure
//	platform failure, unknown    platform-failure
//	backend panicked             platform-failure
//
// A permit naming a backend the runner does not have, or a lease of
// another cell class than the permit's, is a platform failure before the
// guest starts; the untouched cell is released.
//
// # Cell disposition
//
// The backend's Exit decides after every exit: a cell it vouches for is
// released, one whose state it cannot vouch for ([Exit.CellUncertain])
// is quarantined. A backend that panicked in Run is not trusted, and its
// cell is quarantined.
//
// # Callers
//
// [Activation] is both the scheduler's job and the caller's handle. A
// caller may stop waiting at any time ([Activation.Wait] returns its
// context's cause); that releases nothing. Cancelling the activation's
// own context interrupts the guest, but the reservation stays with the
// executing goroutine until the guest has actually stopped.
//
// # Caveats
//
// The runner enforces cell class, backend, fuel, memory and the deadline.
// Threading, state model, features and call depth are passed to the
// backend in [Guest.Obligations]; only the backend can enforce them
// inside the guest. A backend that never returns from Run holds its
// reservation and cell forever, by design: the runner does not kill
// guests.
package runner
