package shadow

import (
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"latent.dev/admission/internal/trace"
)

// pass is what the first pass over the trace found.
type pass struct {
	medians map[string]time.Duration // by route key
}

func routeKey(t trace.Target) string { return t.Tenant + "/" + t.Service + "/" + t.Route }

// firstPass reads the trace once for the recorded durations per route
// (bounded reservoirs). The replay runs it when it first needs a median,
// so a replay that estimates no hold reads the trace once.
func firstPass(cfg Config) (*pass, error) {
	rd, err := trace.Open(cfg.Files, cfg.Window)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	type reservoir struct {
		seen int
		ns   []int64
	}
	rng := rand.New(rand.NewPCG(1, 2))
	routes := map[string]*reservoir{}
	open := map[uint64]string{} // recorded admissions not yet released, by order
	p := &pass{medians: map[string]time.Duration{}}
	for {
		l, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch l.Kind {
		case trace.KindDecision:
			if l.Decision.Answer == trace.AnswerAdmitted && len(open) < maxOpenHolds {
				open[l.Order] = routeKey(l.Decision.Target)
			}
		case trace.KindStart:
			if l.Move.Refused {
				delete(open, l.Move.Of)
			}
		case trace.KindRelease:
			key, ok := open[l.Move.Of]
			if !ok {
				continue
			}
			delete(open, l.Move.Of)
			if l.Move.Reclaimed {
				continue // a leak's duration says nothing of the route's
			}
			rs := routes[key]
			if rs == nil {
				if len(routes) >= maxRoutes {
					continue // a trace with that many routes: the rest get no median
				}
				rs = &reservoir{}
				routes[key] = rs
			}
			rs.seen++
			if len(rs.ns) < reservoirSize {
				rs.ns = append(rs.ns, l.Move.ElapsedNS)
			} else if j := rng.IntN(rs.seen); j < reservoirSize {
				rs.ns[j] = l.Move.ElapsedNS
			}
		}
	}
	for key, rs := range routes {
		slices.Sort(rs.ns)
		n := len(rs.ns)
		m := rs.ns[n/2]
		if n%2 == 0 {
			m = rs.ns[n/2-1] + (rs.ns[n/2]-rs.ns[n/2-1])/2
		}
		p.medians[key] = time.Duration(m)
	}
	return p, nil
}
