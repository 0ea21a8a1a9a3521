// Package deadline owns time in admission: the clock seam, binding the
// effective deadline once at admission, and the checked feasibility
// arithmetic.
//
// # Clock
//
// Deciding functions take now as a parameter; the live path reads an
// injected [Clock]. The controller reads Now once before the policy work
// and, under the ledger mutex, derives a second reading with Since (a
// monotonic-only read) so that lock contention can never let an expired
// deadline or a stale load sample through. A clock that goes backwards
// does not move the second reading before the first.
//
// # Effective deadline
//
//	deadline = min(now + granted_wall_time, caller_deadline)
//
// bound once from the first reading (which carries the monotonic clock on
// the live path) and never reset: the scheduler and runner enforce this
// same instant.
//
// # Feasibility
//
// For the selected cell class with n live reservations (queued plus
// executing) and parallelism p:
//
//	local_wait = floor(n/p) * estimated_service
//	required   = max(local_wait, observed_queue_delay[class])
//	             + minimum_execution + safety_margin
//	reject when deadline - now <= required
//
// Every multiplication and addition is checked: an overflow rejects and
// is never wrapped. A rejection is retryable unless
// deadline - now <= minimum_execution + safety_margin (it would be refused
// even with no local wait and no observed delay, so nothing that drains
// can help) or the arithmetic overflowed.
// The check runs inside the ledger's critical section, so a concurrent
// caller sees every earlier reservation in n.
package deadline
