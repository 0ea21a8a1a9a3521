package gen

import (
	"sync"
	"time"

	"latent.dev/admission/policy"
)

// Clock is a settable clock (core's deadline.Clock and the model's Clock).
// Armed, its next Now reads the earlier time and every later reading the
// later one: time that passes during one live admission, between the
// reading before the checks and the one under the mutex.
type Clock struct {
	mu      sync.Mutex
	now     time.Time  // guarded by mu
	pending *time.Time // guarded by mu; what the next Now returns, once
}

// NewClock returns a clock reading now.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the armed earlier time once, else the current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.pending; p != nil {
		c.pending = nil
		return *p
	}
	return c.now
}

// Since measures from t to the current time.
func (c *Clock) Since(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(t)
}

// Set makes every reading now.
func (c *Clock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.pending = now, nil
}

// Arm makes the next Now read first and every later reading then.
func (c *Clock) Arm(first, then time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now, c.pending = then, &first
}

// Source is an immutable in-memory revision policy source: one
// generation of deployed revisions, each a full identity tuple.
type Source struct {
	Entries []Entry
}

// Entry is one deployed revision.
type Entry struct {
	Revision policy.ResolvedRevision
	Policy   *policy.RevisionPolicy
}

// RevisionPolicy verifies every field of the tuple, as a pinned view does.
func (s *Source) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	for i := range s.Entries {
		e := &s.Entries[i].Revision
		if e.Tenant == rev.Tenant && e.Service == rev.Service && e.Route == rev.Route && e.Contract == rev.Contract &&
			e.Function == rev.Function && e.Revision == rev.Revision && e.Release == rev.Release && e.Generation == rev.Generation {
			return s.Entries[i].Policy, true
		}
	}
	return nil, false
}
