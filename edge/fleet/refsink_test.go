package fleet

import (
	"errors"
	"sync"
	"time"
)

// refSink is the reference sink: it holds each fleet tenant's slice and
// deadline and admits against them exactly under one mutex, and admits
// a tenant that is not fleet-limited against a local limit. It is also
// the broker's Usage. The core's lock-free slices are held to the same
// rule later.
type refSink struct {
	node string
	rec  *recorder // nil: not recorded

	mu          sync.Mutex
	slices      map[string]grant  // guarded by mu
	local       map[string]int64  // guarded by mu; limits of the tenants not fleet-limited
	live        map[string]int64  // guarded by mu
	refused     map[string]uint64 // guarded by mu; refusals for a full slice
	lastExpired time.Time         // guarded by mu; first refusal for a lapsed deadline, zero once admitting again
}

type grant struct {
	slice int64
	until time.Time
}

var (
	errFull        = errors.New("resource-exhausted / fleet / live-activations / capacity-exhausted")
	errUnavailable = errors.New("unavailable / fleet / fleet-slice / fleet-unavailable")
)

func newRefSink(node string, rec *recorder, local map[string]int64) *refSink {
	return &refSink{node: node, rec: rec, slices: map[string]grant{}, local: local, live: map[string]int64{}, refused: map[string]uint64{}}
}

func (s *refSink) Publish(tenant string, slice int64, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slices[tenant] = grant{slice: slice, until: until}
}

// Admit admits one activation of tenant or says why not.
func (s *refSink) Admit(tenant string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if limit, ok := s.local[tenant]; ok {
		if s.live[tenant] >= limit {
			return errFull
		}
	} else {
		g, ok := s.slices[tenant]
		if !ok || !now.Before(g.until) {
			if s.lastExpired.IsZero() {
				s.lastExpired = now
			}
			return errUnavailable
		}
		if s.live[tenant] >= g.slice {
			s.refused[tenant]++
			return errFull
		}
		s.lastExpired = time.Time{}
	}
	s.live[tenant]++
	if s.rec != nil {
		s.rec.add(event{at: now, node: s.node, tenant: tenant, delta: 1})
	}
	return nil
}

func (s *refSink) Release(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live[tenant] <= 0 {
		panic("refSink: release without an admission")
	}
	s.live[tenant]--
	if s.rec != nil {
		s.rec.add(event{at: time.Now(), node: s.node, tenant: tenant, delta: -1})
	}
}

func (s *refSink) Live(tenant string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[tenant]
}

func (s *refSink) Refused(tenant string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[tenant]
}

func (s *refSink) slice(tenant string) grant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.slices[tenant]
}

// event is one admission (+1) or release (-1), stamped under the sink's
// mutex with a reading of the monotonic clock.
type event struct {
	at     time.Time
	node   string
	tenant string
	delta  int64
}

// recorder collects the events of every node in the process; the nodes
// share its clock.
type recorder struct {
	mu     sync.Mutex
	events []event // guarded by mu
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// fleetLive replays the events of tenant in time order and returns the
// largest fleet-wide live count, the time it was reached and every
// admission's time.
func (r *recorder) fleetLive(tenant string) (peak int64, admissions []time.Time) {
	r.mu.Lock()
	events := append([]event(nil), r.events...)
	r.mu.Unlock()
	sortEvents(events)
	var live int64
	for _, e := range events {
		if e.tenant != tenant {
			continue
		}
		live += e.delta
		peak = max(peak, live)
		if e.delta > 0 {
			admissions = append(admissions, e.at)
		}
	}
	return peak, admissions
}
