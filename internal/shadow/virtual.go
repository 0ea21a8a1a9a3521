package shadow

import (
	"time"

	"latent.dev/admission/core"
)

// vclock is the replay's clock: Now is the decision's recorded time, and
// Since hands out the decision's recorded readings in order, then the
// last again (0 when there were none).
type vclock struct {
	now   time.Time
	since []int64
	next  int
	last  int64
}

func (c *vclock) set(now time.Time, since []int64) {
	c.now, c.since, c.next, c.last = now, since, 0, 0
}

// Now returns the decision's time.
func (c *vclock) Now() time.Time { return c.now }

// Since returns the next recorded reading.
func (c *vclock) Since(time.Time) time.Duration {
	if c.next < len(c.since) {
		c.last = c.since[c.next]
		c.next++
	}
	return time.Duration(c.last)
}

// vload is the replay's load source: the first call of a decision
// answers the sample step 12 judged, every later call the one the commit
// judged.
type vload struct {
	calls             int
	first, second     *core.LoadSample
	firstOK, secondOK bool
}

// CurrentLoad returns the recorded sample of this call.
func (l *vload) CurrentLoad() (*core.LoadSample, bool) {
	l.calls++
	if l.calls == 1 {
		return l.first, l.firstOK
	}
	return l.second, l.secondOK
}
