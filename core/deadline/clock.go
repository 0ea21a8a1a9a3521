package deadline

import "time"

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

// Elapsed is the time since an earlier reading first according to c,
// without a second wall-clock read (on the system clock, Since reads only
// the monotonic clock), and never negative: a clock that went backwards never moves time backwards
// here, so a decision cannot become valid because the clock regressed.
func Elapsed(c Clock, first time.Time) time.Duration {
	return max(c.Since(first), 0)
}
