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
// generation of deployed revisions, each a full identity tuple. It is a
// core.RecordSource: each entry is a record with a requirements slot, and
// Handle hands out handles to them, as a catalog pin's Resolve does.
type Source struct {
	Entries []Entry

	once  sync.Once
	slots []policy.RecordSlot // requirements slot of Entries[i]; made on first use
}

// Entry is one deployed revision.
type Entry struct {
	Revision policy.ResolvedRevision
	Policy   *policy.RevisionPolicy
}

// Handle refers to one entry of one source.
type Handle struct {
	source *Source
	index  int
}

// RevisionIdentity is the identity of the entry h refers to.
func (h *Handle) RevisionIdentity() policy.RevisionIdentity {
	return h.source.Entries[h.index].Revision.RevisionIdentity
}

// Handle returns a handle to Entries[i].
func (s *Source) Handle(i int) *Handle { return &Handle{s, i} }

func (s *Source) slot(i int) *policy.RecordSlot {
	s.once.Do(func() { s.slots = make([]policy.RecordSlot, len(s.Entries)) })
	return &s.slots[i]
}

// find returns the index of the entry whose tuple is rev's, or -1.
func (s *Source) find(rev *policy.ResolvedRevision) int {
	for i := range s.Entries {
		e := &s.Entries[i].Revision
		if e.Tenant == rev.Tenant && e.Service == rev.Service && e.Route == rev.Route && e.Contract == rev.Contract &&
			e.Function == rev.Function && e.Revision == rev.Revision && e.Release == rev.Release && e.Generation == rev.Generation {
			return i
		}
	}
	return -1
}

// RevisionPolicy verifies every field of the tuple, as a pinned view does.
func (s *Source) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if i := s.find(rev); i >= 0 {
		return s.Entries[i].Policy, true
	}
	return nil, false
}

// RevisionRecord is RevisionPolicy that returns the whole record; it
// searches its entries whatever the handle.
func (s *Source) RevisionRecord(_ any, rev *policy.ResolvedRevision) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	if i := s.find(rev); i >= 0 {
		return &s.Entries[i].Revision.RevisionIdentity, s.Entries[i].Policy, s.slot(i), true
	}
	return nil, nil, nil, false
}

// OwnRecord returns the record of a handle this source made.
func (s *Source) OwnRecord(h any) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	if own, ok := h.(*Handle); ok && own != nil && own.source == s {
		return &s.Entries[own.index].Revision.RevisionIdentity, s.Entries[own.index].Policy, s.slot(own.index), true
	}
	return nil, nil, nil, false
}
