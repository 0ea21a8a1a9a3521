package latentd

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/core"
)

// Bounds of what the status page keeps in memory.
const (
	// RecentOutcomes is how many executed activations the page lists.
	RecentOutcomes = 32
	// rejectionWindow is the window of "rejections over the last
	// minute"; rejectionSamples holds one sample per second over it,
	// plus the one at its start.
	rejectionWindow  = time.Minute
	rejectionSamples = 62
)

// statusState is what the status page needs beyond the node's own
// surfaces: a ring of the latest executed activations and a ring of
// per-second samples of the rejection counters. Both are fixed-size.
type statusState struct {
	n *Node

	mu       sync.Mutex
	outcomes [RecentOutcomes]outcomeRecord // ring; guarded by mu
	nextOut  int                           // next slot; guarded by mu
	numOut   int                           // filled slots; guarded by mu

	samples    [rejectionSamples]rejectionSample // ring; guarded by mu
	nextSample int                               // guarded by mu
	numSample  int                               // guarded by mu
	// sampledSecond is the Unix second of the newest sample: atomic,
	// stored with mu held (sampleLocked) and loaded without it, so
	// requests check it cheaply.
	sampledSecond atomic.Int64
	now           func() time.Time // set by routes, never changed
}

// outcomeRecord is one executed activation. Tenant, service and route
// are the configured names it resolved to (never the caller's other
// strings); the activation ID, which the caller chooses, is not kept.
type outcomeRecord struct {
	at                     time.Time
	tenant, service, route string
	outcome                string // one of the Outcome* constants
	status                 int
	duration               time.Duration
}

// rejectionSample is the rejection counters (indexed like
// core.AllErrors) at one instant.
type rejectionSample struct {
	at     time.Time
	counts []int64
}

// record keeps one executed activation, named by the configured names
// its request resolved to (note.tenant, note.service, note.route; empty
// when it did not resolve), never by the caller's other strings.
func (st *statusState) record(end time.Time, note *requestNote, status int, duration time.Duration) {
	rec := outcomeRecord{at: end, tenant: note.tenant, service: note.service, route: note.route, outcome: note.outcome,
		status: status, duration: duration}
	st.mu.Lock()
	st.outcomes[st.nextOut] = rec
	st.nextOut = (st.nextOut + 1) % len(st.outcomes)
	if st.numOut < len(st.outcomes) {
		st.numOut++
	}
	st.mu.Unlock()
}

// maybeSample takes a sample of the rejection counters unless one was
// taken in now's second.
func (st *statusState) maybeSample(now time.Time) {
	sec := now.Unix()
	if st.sampledSecond.Load() >= sec {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sampleLocked(now)
}

// sampleLocked takes a sample unless one was taken in now's second.
// Called with st.mu held.
func (st *statusState) sampleLocked(now time.Time) {
	sec := now.Unix()
	if st.sampledSecond.Load() >= sec && st.numSample > 0 {
		return
	}
	m := st.n.provider.Metrics()
	slot := &st.samples[st.nextSample]
	if slot.counts == nil {
		slot.counts = make([]int64, len(m.Rejected))
	}
	for i, c := range m.Rejected {
		if i < len(slot.counts) {
			slot.counts[i] = c.Count
		}
	}
	slot.at = now
	st.nextSample = (st.nextSample + 1) % len(st.samples)
	if st.numSample < len(st.samples) {
		st.numSample++
	}
	st.sampledSecond.Store(sec)
}

// baselineLocked is the sample the window is counted from: the newest
// one at least a window old, or else the oldest one kept. Called with
// st.mu held.
func (st *statusState) baselineLocked(now time.Time) *rejectionSample {
	var base *rejectionSample
	for i := 0; i < st.numSample; i++ {
		// From the oldest to the newest.
		s := &st.samples[(st.nextSample-st.numSample+i+2*len(st.samples))%len(st.samples)]
		if base == nil || now.Sub(s.at) >= rejectionWindow {
			base = s
		}
	}
	return base
}

// serveStatus serves GET /v1/admin/status (administrators only).
func (st *statusState) serveStatus(w http.ResponseWriter, _ *http.Request) {
	now := st.now()
	compiled := st.n.provider.Policy()
	u := st.n.provider.Usage()
	out := statusJSON{NowUnixMS: now.UnixMilli(), Admitted: st.n.provider.Metrics().Admitted,
		Live: st.n.provider.LiveReservations()}
	out.Scopes = append(out.Scopes, statusScope("node", "node", u.Node))
	if rec := st.n.rec; rec != nil {
		out.Recording = &statusRecordJSON{Path: st.n.cfg.RecordPath, State: "recording",
			WriteErrors: rec.w.Failures(), DroppedLines: rec.w.Dropped()}
		if err := rec.w.Err(); err != nil {
			out.Recording.State, out.Recording.Error = "stopped", err.Error()
		}
	}
	for _, s := range u.Tenants {
		out.Scopes = append(out.Scopes, statusScope("tenant", s.Name, s))
	}
	out.Fleet = st.n.fleetStatus(time.Now()) // the slices' deadlines are on the monotonic clock
	for _, s := range u.TrustClasses {
		out.Scopes = append(out.Scopes, statusScope("trust-class", s.Name, s))
	}
	out.QueueClasses = make([]statusQueueJSON, 0, len(u.QueueClasses))
	for _, q := range u.QueueClasses {
		out.QueueClasses = append(out.QueueClasses, statusQueueJSON{Name: q.Name, Queued: q.Queued, MaxQueued: q.MaxQueued})
	}
	out.CellClasses = make([]statusCellJSON, 0, len(u.CellClasses))
	for _, c := range u.CellClasses {
		out.CellClasses = append(out.CellClasses, statusCellJSON{Class: c.Class.String(), Live: c.Live,
			Parallelism: compiled.CellClass(c.Class).Parallelism})
	}
	overload := compiled.Node().Overload
	if s, ok := st.n.load.CurrentLoad(); ok {
		out.Load = &statusLoadJSON{Sequence: s.Sequence, CPU: s.CPUPressure, Memory: s.MemoryPressure,
			CPUThreshold: overload.CPUThreshold, MemoryThreshold: overload.MemoryThreshold,
			AgeMS: now.Sub(s.ObservedAt).Milliseconds(), MaxAgeMS: overload.MaximumObservationAge.Milliseconds()}
	}

	m := st.n.provider.Metrics()
	all := core.AllErrors()
	st.mu.Lock()
	st.sampleLocked(now)
	base := st.baselineLocked(now)
	byReason := map[core.Reason]int64{}
	for i, c := range m.Rejected {
		var before int64
		if base != nil && i < len(base.counts) {
			before = base.counts[i]
		}
		if d := c.Count - before; d > 0 && i < len(all) {
			byReason[all[i].Reason()] += d
		}
	}
	if base != nil {
		out.Rejections.WindowMS = now.Sub(base.at).Milliseconds()
	}
	out.Outcomes.Capacity = len(st.outcomes)
	out.Outcomes.Recent = make([]statusOutcomeJSON, 0, st.numOut)
	for i := 1; i <= st.numOut; i++ {
		rec := st.outcomes[(st.nextOut-i+len(st.outcomes))%len(st.outcomes)]
		out.Outcomes.Recent = append(out.Outcomes.Recent, statusOutcomeJSON{AtUnixMS: rec.at.UnixMilli(), Tenant: rec.tenant,
			Service: rec.service, Route: rec.route, Outcome: rec.outcome, Status: rec.status,
			DurationMS: float64(rec.duration.Microseconds()) / 1000})
	}
	st.mu.Unlock()
	out.Rejections.ByReason = []statusReasonJSON{}
	for _, reason := range core.Reasons() {
		if c := byReason[reason]; c > 0 {
			out.Rejections.ByReason = append(out.Rejections.ByReason, statusReasonJSON{Reason: string(reason), Count: c})
			out.Rejections.Total += c
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}
