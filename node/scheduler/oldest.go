package scheduler

import (
	"time"

	"latent.dev/admission/policy"
)

// OldestWait reports, per cell class, how long the oldest activation now
// queued for that class has waited at now (0 when none waits, or when
// now precedes its arrival). It is the observed queue delay the node's
// load sampler publishes. It takes mu once and allocates nothing; its
// cost grows with the tenants that have work queued, not with the queued
// activations, because a flow's head is its oldest item.
func (s *Scheduler) OldestWait(now time.Time) [policy.NumCellClasses]time.Duration {
	var out [policy.NumCellClasses]time.Duration
	s.mu.Lock()
	defer s.mu.Unlock()
	for class := range s.queues {
		if s.waiting[class] == 0 {
			continue
		}
		var oldest time.Time
		found := false
		for rank := range s.queues[class] {
			for f := s.queues[class][rank].first; f != nil; f = f.next {
				if t := f.head.queuedAt; !found || t.Before(oldest) {
					oldest, found = t, true
				}
			}
		}
		if found {
			out[class] = max(now.Sub(oldest), 0)
		}
	}
	return out
}
