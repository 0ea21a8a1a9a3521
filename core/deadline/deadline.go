package deadline

import (
	"math"
	"time"
)

// Clock is the time source admission reads. Now carries a monotonic
// reading on the live path; Since measures elapsed time from a Now
// reading, which on the system clock reads only the monotonic clock and so
// costs about half of a second Now.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
}

// System is the process clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Since returns time.Since(t).
func (System) Since(t time.Time) time.Duration { return time.Since(t) }

// HasMonotonic reports whether t carries a monotonic clock reading
// (time.Now's results and times derived from them by Add do; times built
// from a wall-clock value, or stripped by Round(0), do not).
func HasMonotonic(t time.Time) bool { return t != t.Round(0) }

// UntilCaller is the time from now to an absolute caller deadline (unix
// milliseconds); at or below zero the deadline has passed. Sub saturates
// instead of overflowing, so a far-future deadline is simply very far.
func UntilCaller(now time.Time, callerUnixMillis int64) time.Duration {
	return time.UnixMilli(callerUnixMillis).Sub(now)
}

// Shorten is the effective wall time of a grant to a caller with a
// deadline: the granted wall time, or what the caller's deadline leaves
// (untilCaller) when that is less. Without a caller deadline the granted
// wall time is the effective one. The effective deadline is the admission
// reading plus it, bound once, to a reading that carries the monotonic
// clock, and never reset.
func Shorten(granted, untilCaller time.Duration) time.Duration {
	return min(granted, untilCaller)
}

// Estimate is the configured part of the feasibility check.
type Estimate struct {
	EstimatedServiceTime time.Duration
	MinimumExecutionTime time.Duration
	SafetyMargin         time.Duration
}

// Verdict is the outcome of a feasibility check.
type Verdict uint8

const (
	// Feasible: the remaining time exceeds what the queue requires.
	Feasible Verdict = iota
	// Infeasible: the queue cannot meet the deadline now, but could with
	// less local wait or observed delay; retrying may help.
	Infeasible
	// InfeasibleAlways: the remaining time does not exceed
	// minimum_execution + safety_margin, so the request would be refused
	// even with no local wait and no observed delay; retrying cannot help.
	InfeasibleAlways
	// Overflow: the arithmetic overflowed; rejected, never wrapped, and
	// not retryable.
	Overflow
)

// Check decides whether remaining time suffices for the selected class
// with backlog live reservations (queued plus executing), parallelism p
// and observed queue delay:
//
//	local_wait = floor(backlog/p) * estimated_service
//	least      = minimum_execution + safety_margin
//	required   = max(local_wait, observed) + least
//	feasible  <=> remaining > required
//
// An infeasible answer is [InfeasibleAlways] when remaining <= least and
// [Infeasible] otherwise. Every operation is checked; an overflow, or an
// input no policy can hold (zero parallelism, a negative duration),
// answers [Overflow].
func Check(remaining time.Duration, backlog, parallelism uint64, observed time.Duration, e Estimate) Verdict {
	if parallelism == 0 || observed < 0 || e.EstimatedServiceTime < 0 || e.MinimumExecutionTime < 0 || e.SafetyMargin < 0 {
		return Overflow
	}
	least, ok := addChecked(e.MinimumExecutionTime, e.SafetyMargin)
	if !ok {
		return Overflow
	}
	waves := backlog / parallelism
	var localWait time.Duration
	if e.EstimatedServiceTime > 0 {
		if waves > uint64(math.MaxInt64/int64(e.EstimatedServiceTime)) {
			return Overflow
		}
		localWait = time.Duration(waves) * e.EstimatedServiceTime
	}
	required, ok := addChecked(max(localWait, observed), least)
	if !ok {
		return Overflow
	}
	if remaining > required {
		return Feasible
	}
	if remaining <= least {
		return InfeasibleAlways
	}
	return Infeasible
}

// addChecked adds two non-negative durations, reporting overflow.
func addChecked(a, b time.Duration) (time.Duration, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}
