package shadow

import (
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
)

// Series is one scope's reservations over time, under the recorded
// answers and under the candidate, sampled at [Result.Times].
type Series struct {
	// Scope is "node", "tenant NAME", "trust class NAME" or "queue class
	// NAME".
	Scope string
	// Measure is "live activations", or "queued reservations" for a
	// queue class.
	Measure string
	// Limit is the candidate policy's limit of the measure.
	Limit               uint64
	Recorded, Candidate []float64
}

// recHold is a recorded admission as the recorded series count it.
type recHold struct {
	tenant, trust, queue int // scope indexes, -1 for none
	started              bool
}

func (r *replay) takeSample() {
	at := r.nextSample
	r.res.Times = append(r.res.Times, time.Duration(at))
	u := r.provider.Usage()
	s := r.res.Series
	i := 0
	add := func(rec int64, cand uint64) {
		s[i].Recorded = append(s[i].Recorded, float64(rec))
		s[i].Candidate = append(s[i].Candidate, float64(cand))
		i++
	}
	add(r.recLive[0], u.Node.Live)
	for j, t := range u.Tenants {
		add(r.recLive[1+j], t.Live)
	}
	for j, t := range u.TrustClasses {
		add(r.recLive[1+len(u.Tenants)+j], t.Live)
	}
	for j, q := range u.QueueClasses {
		add(r.recQueued[j], q.Queued)
	}
	r.nextSample = addSat(r.nextSample, r.sampleStep)
	if len(r.res.Times) >= 2*SeriesPoints {
		r.halveSeries()
		r.sampleStep = addSat(r.sampleStep, r.sampleStep)
		r.nextSample = addSat(int64(r.res.Times[len(r.res.Times)-1]), r.sampleStep)
	}
}

// halveSeries keeps every other point.
func (r *replay) halveSeries() {
	r.res.Times = everyOther(r.res.Times)
	for i := range r.res.Series {
		s := &r.res.Series[i]
		s.Recorded, s.Candidate = everyOther(s.Recorded), everyOther(s.Candidate)
	}
}

func everyOther[T any](v []T) []T {
	n := 0
	for i := 0; i < len(v); i += 2 {
		v[n] = v[i]
		n++
	}
	return v[:n]
}

// holdRecorded counts a recorded admission in the recorded series.
func (r *replay) holdRecorded(l *trace.Line, p *core.AdmissionPermit) {
	if len(r.recHolds) >= maxOpenHolds {
		// More recorded admissions unreleased at once than any node
		// holds: a trace not written by latentd. Not counted.
		r.untracked++
		return
	}
	d := l.Decision
	h := &recHold{tenant: -1, trust: -1, queue: -1}
	if i, ok := r.tenantIx[d.Target.Tenant]; ok {
		h.tenant = i
	}
	if p != nil {
		g := p.Grant()
		h.trust, h.queue = r.index(r.trustIx, g.Obligations.TrustClass), r.index(r.queueIx, g.Obligations.QueueClass)
	} else {
		if q, ok := r.compiled.QueueClassFor(d.Priority); ok {
			h.queue = int(q)
		}
		if pin := r.pinFor(d.Generation, false); pin != nil {
			if rev, _, err := pin.Resolve(catalog.Target{Tenant: d.Target.Tenant, Service: d.Target.Service, Route: d.Target.Route}, d.RoutingKey); err == nil {
				if rp, ok := pin.RevisionPolicy(rev); ok {
					h.trust = r.index(r.trustIx, rp.TrustClass)
				}
			}
		}
	}
	r.recHolds[l.Order] = h
	r.recLive[0]++
	for _, i := range []int{h.tenant, h.trust} {
		if i >= 0 {
			r.recLive[i]++
		}
	}
	if h.queue >= 0 {
		r.recQueued[h.queue]++
	}
}

func (r *replay) index(m map[string]int, name string) int {
	if i, ok := m[name]; ok {
		return i
	}
	return -1
}

// moveRecorded follows a start or release in the recorded series.
func (r *replay) moveRecorded(of uint64, start, released bool) {
	h := r.recHolds[of]
	if h == nil {
		return
	}
	if !h.started && h.queue >= 0 && (start || released) {
		r.recQueued[h.queue]--
	}
	h.started = h.started || start
	if released {
		r.recLive[0]--
		for _, i := range []int{h.tenant, h.trust} {
			if i >= 0 {
				r.recLive[i]--
			}
		}
		delete(r.recHolds, of)
	}
}
