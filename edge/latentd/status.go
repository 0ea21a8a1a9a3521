package latentd

import (
	"embed"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
)

// The status page: GET /status, /status.js and /status.css are a static
// shell embedded in the binary, served without authentication because
// they hold no data. The script reads an administrator token from the
// URL's fragment (which the browser never sends) or from a password
// field and polls GET /v1/admin/status with it as a bearer token; that
// endpoint is authorized like the administrator snapshot.

//go:embed status_assets
var statusAssets embed.FS

// statusCSP is the page's Content-Security-Policy: nothing but the
// node's own script, stylesheet and JSON endpoint; no inline script or
// style, no frames, no form submissions.
const statusCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

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

// invokePattern is the mux pattern of invocations (see routes).
const invokePattern = "POST /v1/invoke/{tenant}/{service}/{route}"

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
	// sampledSecond is the Unix second of the newest sample, read
	// without the lock so requests check it cheaply.
	sampledSecond atomic.Int64
	now           func() time.Time
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

// knownOutcomes maps Latent-Outcome values to themselves: only these are
// recorded.
var knownOutcomes = map[string]string{
	OutcomeSuccess: OutcomeSuccess, OutcomeDeclaredError: OutcomeDeclaredError, OutcomeTrap: OutcomeTrap,
	OutcomeDeadline: OutcomeDeadline, OutcomeFuel: OutcomeFuel, OutcomeMemory: OutcomeMemory,
	OutcomeCanceled: OutcomeCanceled, OutcomePlatformFailure: OutcomePlatformFailure,
}

// withStatus registers the status page's routes on mux and returns mux
// wrapped so that invocations are recorded for the page.
func (n *Node) withStatus(mux *http.ServeMux) http.Handler {
	st := &statusState{n: n, now: time.Now}
	mux.HandleFunc("GET /status", serveAsset("status_assets/status.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /status.js", serveAsset("status_assets/status.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /status.css", serveAsset("status_assets/status.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /v1/admin/status", n.admin(st.serveStatus))
	return st.observe(mux)
}

// serveAsset serves one embedded file with the page's security headers.
func serveAsset(name, contentType string) http.HandlerFunc {
	data, err := statusAssets.ReadFile(name)
	if err != nil {
		panic("latentd: the status page's asset " + name + " is not embedded") // a build defect, not input
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", statusCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
	}
}

// statusWriter remembers the status an invocation was answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe samples the rejection counters at most once a second, at the
// start of any request (the counters change only while requests run), and
// records every invocation that ran or was scheduled: one that answered
// with a Latent-Outcome.
func (st *statusState) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := st.now()
		st.maybeSample(start)
		if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/invoke/") {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		// The mux set r's pattern and path values in place.
		if r.Pattern != invokePattern {
			return
		}
		outcome, ok := knownOutcomes[w.Header().Get("Latent-Outcome")]
		if !ok {
			return
		}
		st.record(start, r.PathValue("tenant"), r.PathValue("service"), r.PathValue("route"), outcome, sw.status)
	})
}

// record keeps one outcome. The names are kept only when the current
// catalog still resolves them, so that nothing but configured names is
// ever shown; otherwise they are left empty.
func (st *statusState) record(start time.Time, tenant, service, route, outcome string, status int) {
	end := st.now()
	if _, _, err := st.n.view.Load().pin.Resolve(catalog.Target{Tenant: tenant, Service: service, Route: route}, ""); err != nil {
		tenant, service, route = "", "", ""
	}
	rec := outcomeRecord{at: end, tenant: tenant, service: service, route: route, outcome: outcome, status: status,
		duration: end.Sub(start)}
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
// one at least a window old, or else the oldest one kept.
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

// The JSON of GET /v1/admin/status.
type (
	statusJSON struct {
		NowUnixMS    int64             `json:"now_unix_ms"`
		Scopes       []statusScopeJSON `json:"scopes"`
		QueueClasses []statusQueueJSON `json:"queue_classes"`
		CellClasses  []statusCellJSON  `json:"cell_classes"`
		Load         *statusLoadJSON   `json:"load"`
		Rejections   statusRejectJSON  `json:"rejections"`
		Outcomes     statusOutcomeList `json:"outcomes"`
		Admitted     int64             `json:"admitted"`
		Live         int               `json:"live_reservations"`
	}
	statusScopeJSON struct {
		Kind       string          `json:"kind"` // node, tenant, trust-class
		Name       string          `json:"name"`
		Dimensions []statusDimJSON `json:"dimensions"`
	}
	statusDimJSON struct {
		Dimension string `json:"dimension"`
		Reserved  uint64 `json:"reserved"`
		Limit     uint64 `json:"limit"`
	}
	statusQueueJSON struct {
		Name      string `json:"name"`
		Queued    uint64 `json:"queued_reservations"`
		MaxQueued uint64 `json:"max_queued"`
	}
	statusCellJSON struct {
		Class       string `json:"class"`
		Live        uint64 `json:"live_activations"`
		Parallelism uint64 `json:"parallelism"`
	}
	statusLoadJSON struct {
		Sequence        uint64  `json:"sequence"`
		CPU             float64 `json:"cpu"`
		Memory          float64 `json:"memory"`
		CPUThreshold    float64 `json:"cpu_threshold"`
		MemoryThreshold float64 `json:"memory_threshold"`
		AgeMS           int64   `json:"age_ms"`
		MaxAgeMS        int64   `json:"max_age_ms"`
	}
	statusRejectJSON struct {
		WindowMS int64              `json:"window_ms"`
		Total    int64              `json:"total"`
		ByReason []statusReasonJSON `json:"by_reason"`
	}
	statusReasonJSON struct {
		Reason string `json:"reason"`
		Count  int64  `json:"count"`
	}
	statusOutcomeList struct {
		Capacity int                 `json:"capacity"`
		Recent   []statusOutcomeJSON `json:"recent"` // newest first
	}
	statusOutcomeJSON struct {
		AtUnixMS   int64   `json:"at_unix_ms"`
		Tenant     string  `json:"tenant"`
		Service    string  `json:"service"`
		Route      string  `json:"route"`
		Outcome    string  `json:"outcome"`
		Status     int     `json:"status"`
		DurationMS float64 `json:"duration_ms"`
	}
)

// Dimension names, the vocabulary's.
var statusDimensions = [4]string{string(core.DimLiveActivations), string(core.DimQueuedReservations),
	string(core.DimCPUFuel), string(core.DimMemoryBytes)}

func statusScope(kind, name string, s core.ScopeUsage) statusScopeJSON {
	reserved := [4]uint64{s.Live, s.Queued, s.CPUFuel, s.MemoryBytes}
	limits := [4]uint64{s.Limits.MaxLiveActivations, s.Limits.MaxQueuedReservations, s.Limits.MaxReservedCPUFuel,
		s.Limits.MaxReservedMemoryBytes}
	dims := make([]statusDimJSON, len(reserved))
	for i := range reserved {
		dims[i] = statusDimJSON{Dimension: statusDimensions[i], Reserved: reserved[i], Limit: limits[i]}
	}
	return statusScopeJSON{Kind: kind, Name: name, Dimensions: dims}
}

// serveStatus serves GET /v1/admin/status (administrators only).
func (st *statusState) serveStatus(w http.ResponseWriter, _ *http.Request) {
	now := st.now()
	compiled := st.n.provider.Policy()
	u := st.n.provider.Usage()
	out := statusJSON{NowUnixMS: now.UnixMilli(), Admitted: st.n.provider.Metrics().Admitted,
		Live: st.n.provider.LiveReservations()}
	out.Scopes = append(out.Scopes, statusScope("node", "node", u.Node))
	for _, s := range u.Tenants {
		out.Scopes = append(out.Scopes, statusScope("tenant", s.Name, s))
	}
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
