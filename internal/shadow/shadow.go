// Package shadow replays a decision trace (internal/trace, what `latentd
// -record` writes) through admission under a candidate policy and says
// what would have changed (docs/record-and-shadow.md).
//
// The replay runs the core itself: one [core.LocalQuotaProvider] for the
// candidate policy, one controller per catalog generation the trace
// names, on a virtual clock that answers each decision with the readings
// it recorded, and a load source that answers with the samples it
// recorded. Every start and release the trace holds moves the replay's
// ledger as it moved the node's, so under the recording's own policy a
// complete trace replays to the same answers, decision for decision.
//
// Under another policy a decision the node refused may be admitted. The
// trace cannot say how long it would have run, so the replay estimates
// it: the median recorded duration (admission to release) of its route,
// or, when its route has none, the wall time the candidate granted. Such
// a hold starts at once and is released when the virtual time passes its
// admission plus that duration. [Result.Estimated] counts them.
package shadow

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"
	"unicode/utf8"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// Bounds of a replay.
const (
	// KeptPins is how many catalog generations a replay keeps; a decision
	// resolved in an older one uses the oldest kept.
	KeptPins = 16
	// KeptChanges is how many changed decisions a Result lists.
	KeptChanges = 20
	// SeriesPoints is the most points a time series has.
	SeriesPoints = 500
	// reservoirSize bounds the recorded durations kept per route for
	// the medians.
	reservoirSize = 1024
	// MaxOpenHolds bounds the recorded admissions not yet released that
	// a replay follows at once (in the recorded series and for the
	// medians); past it a recorded admission is not followed, and the
	// replay is not exact. A node holds far fewer: its live and queued
	// limits bound them.
	MaxOpenHolds = 1 << 20
	// maxRoutes bounds the routes whose recorded durations the first
	// pass keeps; a route past it has no median (its holds are
	// estimated with the granted wall time).
	maxRoutes = 4096
	// KeptTenants is how many tenants [Result.Refusals] names: those with
	// the most refusals (recorded and under the candidate); the others'
	// refusals are summed under [OtherTenants].
	KeptTenants = 50
	// OtherTenants is the tenant of the rows that sum the tenants not
	// named (it is no identifier, so no tenant's name).
	OtherTenants = "(other tenants)"
	// OtherAnswer is the reason of the rows that count recorded answers
	// outside the vocabulary (a trace not written by latentd).
	OtherAnswer = "(other answer)"
	// trackedTenants bounds how many tenants outside the candidate policy
	// a replay counts apart; once it has seen that many, the next new
	// ones count under OtherTenants at once.
	trackedTenants = 1024
	// MaxNameBytes bounds each name from the trace a [Change] keeps;
	// a longer one is cut and ends in "…".
	MaxNameBytes = 128
)

// maxOpenHolds is MaxOpenHolds; a test lowers it.
var maxOpenHolds = MaxOpenHolds

// knownAnswers are the answers a replay counts by name.
var knownAnswers = func() map[string]bool {
	m := map[string]bool{trace.AnswerAdmitted: true, trace.AnswerUnauthenticated: true}
	for _, r := range core.Reasons() {
		m[string(r)] = true
	}
	return m
}()

// shorten cuts s to at most MaxNameBytes (on a rune boundary) and marks
// the cut.
func shorten(s string) string {
	if len(s) <= MaxNameBytes {
		return s
	}
	n := MaxNameBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Config is one replay.
type Config struct {
	// Policy is the candidate node policy.
	Policy *policy.NodeAdmissionPolicy
	// Catalog, when set, replaces the trace's catalog for the whole
	// replay: its catalog, deploy and undeploy lines are ignored and every
	// decision resolves in this one.
	Catalog *catalog.File
	// Files are the trace's files, in any order.
	Files []string
	// Window is the reorder window in lines; 0 is trace.DefaultWindow.
	Window int
}

// Answer is a decision's answer: trace.AnswerAdmitted, or a refusal's
// reason with its scope and dimension.
type Answer struct {
	Answer    string
	Scope     string
	Dimension string
}

// Admitted reports whether a is an admission.
func (a Answer) Admitted() bool { return a.Answer == trace.AnswerAdmitted }

// String is the answer, then its scope and dimension when set:
// "capacity-exhausted (tenant live-activations)".
func (a Answer) String() string {
	if a.Scope == "" && a.Dimension == "" {
		return a.Answer
	}
	return a.Answer + " (" + a.Scope + " " + a.Dimension + ")"
}

// Change is a decision the candidate answered otherwise.
type Change struct {
	Time                                 time.Time // the decision's time: the trace's start plus T
	Order                                uint64
	Tenant, Service, Route, ActivationID string
	Recorded, Candidate                  Answer
}

// Refusals counts one tenant's refusals for one reason.
type Refusals struct {
	Tenant, Reason      string
	Recorded, Candidate uint64
}

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

// Result is what a replay found.
type Result struct {
	// Start is the trace's start (its header's StartUnixNano).
	Start time.Time
	// PolicySHA256 is the recorded node policy's, from the header.
	PolicySHA256 string
	// Decisions counts the decision lines; RecordedAdmitted and
	// CandidateAdmitted the admissions among them; Changed those
	// answered otherwise.
	Decisions, RecordedAdmitted, CandidateAdmitted, Changed uint64
	// Estimated counts the decisions the node refused and the candidate
	// admitted, whose holds were estimated.
	Estimated uint64
	// Refusals is per tenant and reason, sorted by tenant then reason:
	// at most KeptTenants tenants by name (the most refused), then
	// OtherTenants. A recorded answer outside the vocabulary counts as
	// OtherAnswer.
	Refusals []Refusals
	// Changes are the first KeptChanges changed decisions, in order.
	Changes []Change
	// Exact is true when nothing in the trace kept the replay from
	// being exact; Inexact says what did.
	Exact   bool
	Inexact []string
	// Times are the series' sample points, since Start.
	Times  []time.Duration
	Series []Series
}

// Replay replays cfg.Files under cfg.Policy. An error is a trace that
// cannot be read (a *trace.LineError names its file and line), or a
// policy or catalog that cannot be used.
func Replay(cfg Config) (*Result, error) {
	if cfg.Policy == nil {
		return nil, errors.New("shadow: no candidate policy")
	}
	provider, err := core.NewLocalQuotaProvider(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("the candidate policy: %w", err)
	}
	rd, err := trace.Open(cfg.Files, cfg.Window)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	r := newReplay(cfg, provider, rd)
	if cfg.Catalog != nil {
		cat, err := catalog.FromFile(*cfg.Catalog)
		if err != nil {
			return nil, fmt.Errorf("the catalog: %w", err)
		}
		r.cat, r.override = cat, true
		r.pins = []pinAt{{pin: cat.Pin()}}
	}
	if err := r.run(); err != nil {
		return nil, err
	}
	if r.passErr != nil {
		return nil, r.passErr
	}
	return r.result(), nil
}

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

// pinAt is a replay pin and the recorded generation it stands for.
type pinAt struct {
	gen uint64
	pin *catalog.Pin
}

// held is a replay permit: one of the two is set while it holds.
type held struct {
	adm *core.AdmissionPermit
	exe *core.ExecutionPermit
}

func (h *held) release() {
	if h.exe != nil {
		h.exe.Release()
	}
	if h.adm != nil {
		h.adm.Release()
	}
	h.adm, h.exe = nil, nil
}

// due is an estimated hold's release.
type due struct {
	at int64
	h  *held
}

type dueHeap []due

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].at < d[j].at }
func (d dueHeap) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *dueHeap) Push(x any)        { *d = append(*d, x.(due)) }
func (d *dueHeap) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// recHold is a recorded admission as the recorded series count it.
type recHold struct {
	tenant, trust, queue int // scope indexes, -1 for none
	started              bool
}

type replay struct {
	req      core.AdmissionRequest // the request being decided, reused
	cfg      Config
	rd       *trace.Reader
	pass     *pass // the first pass, once a hold is estimated
	passErr  error
	start    int64
	provider *core.LocalQuotaProvider
	compiled *policy.Compiled
	clock    *vclock
	load     *vload

	cat      *catalog.Catalog
	override bool
	pins     []pinAt // ascending by gen
	ctrls    map[*catalog.Pin]*core.AdmissionController

	permits map[uint64]*held
	due     dueHeap
	latest  *trace.Load // the latest sample handed out in order
	conv    map[uint64]*core.LoadSample

	res      Result
	refusals map[[2]string]*Refusals
	tracked  map[string]bool // tenants outside the policy counted apart

	// the series
	tenantIx, trustIx, queueIx map[string]int
	recLive                    []int64 // node, tenants, trust classes
	recQueued                  []int64 // queue classes
	recHolds                   map[uint64]*recHold
	// the series' next sample time and step: the step doubles, and
	// every other point is dropped, whenever there are 2*SeriesPoints.
	sampling               bool
	nextSample, sampleStep int64

	missingSamples, oldPins, futurePins uint64
	untracked                           uint64 // recorded admissions past MaxOpenHolds
	catalogSeen, noCatalog              bool
}

func newReplay(cfg Config, provider *core.LocalQuotaProvider, rd *trace.Reader) *replay {
	h := rd.Header()
	r := &replay{
		cfg: cfg, rd: rd, start: h.StartUnixNano, provider: provider, compiled: provider.Policy(),
		clock: &vclock{}, load: &vload{}, ctrls: map[*catalog.Pin]*core.AdmissionController{},
		permits: map[uint64]*held{}, conv: map[uint64]*core.LoadSample{}, refusals: map[[2]string]*Refusals{}, tracked: map[string]bool{},
		tenantIx: map[string]int{}, trustIx: map[string]int{}, queueIx: map[string]int{}, recHolds: map[uint64]*recHold{},
	}
	r.res.Start = time.Unix(0, h.StartUnixNano)
	r.res.PolicySHA256 = h.PolicySHA256
	u := provider.Usage()
	r.res.Series = append(r.res.Series, Series{Scope: "node", Measure: "live activations", Limit: u.Node.Limits.MaxLiveActivations})
	for i, t := range u.Tenants {
		r.tenantIx[t.Name] = 1 + i
		r.res.Series = append(r.res.Series, Series{Scope: "tenant " + t.Name, Measure: "live activations", Limit: t.Limits.MaxLiveActivations})
	}
	for i, t := range u.TrustClasses {
		r.trustIx[t.Name] = 1 + len(u.Tenants) + i
		r.res.Series = append(r.res.Series, Series{Scope: "trust class " + t.Name, Measure: "live activations", Limit: t.Limits.MaxLiveActivations})
	}
	for i, q := range u.QueueClasses {
		r.queueIx[q.Name] = i
		r.res.Series = append(r.res.Series, Series{Scope: "queue class " + q.Name, Measure: "queued reservations", Limit: q.MaxQueued})
	}
	r.recLive = make([]int64, 1+len(u.Tenants)+len(u.TrustClasses))
	r.recQueued = make([]int64, len(u.QueueClasses))
	return r
}

func (r *replay) run() error {
	for {
		l, err := r.rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		r.advance(l.T)
		if err := r.line(&l); err != nil {
			pos := r.rd.Pos()
			return &trace.LineError{File: pos.File, Line: pos.Line, Err: err}
		}
	}
	if r.sampling {
		// The last sample, at or after the last line.
		r.advance(addSat(r.nextSample, 1))
		if len(r.res.Times) > SeriesPoints {
			r.halveSeries()
		}
	}
	for _, h := range r.permits {
		h.release()
	}
	return nil
}

// advance releases the estimated holds due at or before t and takes the
// series' samples before t, in time order.
func (r *replay) advance(t int64) {
	if !r.sampling {
		r.sampling, r.nextSample, r.sampleStep = true, t, int64(time.Millisecond)
	}
	for {
		switch {
		case len(r.due) > 0 && r.due[0].at <= t && r.due[0].at <= r.nextSample:
			d := heap.Pop(&r.due).(due)
			d.h.release()
		case r.nextSample < t && r.nextSample < math.MaxInt64:
			r.takeSample()
		default:
			return
		}
	}
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

// addSat is a+b, held at the int64 bounds instead of wrapping: a trace's
// times may be anything, and time must never run backwards (a sample
// time that wrapped would be taken forever).
func addSat(a, b int64) int64 {
	c := a + b
	switch {
	case a > 0 && b > 0 && c < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && c >= 0:
		return math.MinInt64
	}
	return c
}

// at is the wall time of T t.
func (r *replay) at(t int64) time.Time { return time.Unix(0, addSat(r.start, t)) }

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

func (r *replay) line(l *trace.Line) error {
	switch l.Kind {
	case trace.KindCatalog:
		if r.override {
			return nil
		}
		f, err := catalog.DecodeCatalogFile(l.Catalog.File, true)
		if err != nil {
			return fmt.Errorf("the catalog: %w", err)
		}
		cat, err := catalog.FromFile(f)
		if err != nil {
			return fmt.Errorf("the catalog: %w", err)
		}
		r.cat, r.catalogSeen = cat, true
		r.pins, r.ctrls = nil, map[*catalog.Pin]*core.AdmissionController{}
		r.addPin(l.Catalog.Generation)
	case trace.KindDeploy:
		if r.override {
			return nil
		}
		dep, err := catalog.ValidateDeployment(l.Change.Deployment, nil)
		if err != nil {
			return fmt.Errorf("the deployment: %w", err)
		}
		if _, err := r.catalog().Deploy(dep); err != nil {
			return fmt.Errorf("the deployment: %w", err)
		}
		r.addPin(l.Change.Generation)
	case trace.KindUndeploy:
		if r.override {
			return nil
		}
		if _, err := r.catalog().Delete(l.Change.Tenant, l.Change.Service); err != nil {
			return fmt.Errorf("the undeploy: %w", err)
		}
		r.addPin(l.Change.Generation)
	case trace.KindLoad:
		s := *l.Load
		r.latest = &s
	case trace.KindDecision:
		r.decide(l)
	case trace.KindStart:
		r.startLine(l)
	case trace.KindRelease:
		r.releaseLine(l)
	}
	return nil
}

// catalog is the replay catalog; a deploy before any catalog line starts
// from an empty one, and makes the replay inexact.
func (r *replay) catalog() *catalog.Catalog {
	if r.cat == nil {
		r.cat, r.noCatalog = catalog.New(catalog.GenerousCapacity), true
	}
	return r.cat
}

func (r *replay) addPin(gen uint64) {
	p := r.cat.Pin()
	i := sort.Search(len(r.pins), func(i int) bool { return r.pins[i].gen >= gen })
	if i < len(r.pins) && r.pins[i].gen == gen {
		delete(r.ctrls, r.pins[i].pin)
		r.pins[i].pin = p
	} else {
		r.pins = slices.Insert(r.pins, i, pinAt{gen: gen, pin: p})
	}
	if len(r.pins) > KeptPins {
		delete(r.ctrls, r.pins[0].pin)
		r.pins = slices.Delete(r.pins, 0, 1)
	}
}

// pinFor is the pin of recorded generation gen, or the latest at or
// below it; gen 0 (no resolution recorded) is the latest. With count, a
// generation older than those kept, or newer than the last change the
// replay has applied, is counted against exactness.
func (r *replay) pinFor(gen uint64, count bool) *catalog.Pin {
	if len(r.pins) == 0 {
		if !r.override && !r.catalogSeen {
			r.noCatalog = true
		}
		return nil
	}
	if r.override || gen == 0 {
		return r.pins[len(r.pins)-1].pin
	}
	i := sort.Search(len(r.pins), func(i int) bool { return r.pins[i].gen > gen })
	if count && i == len(r.pins) && gen > r.pins[i-1].gen && r.catalogSeen {
		// A generation whose deploy or delete line has not come yet:
		// resolved in the latest, which may not be what the node saw.
		r.futurePins++
	}
	if i == 0 {
		if count {
			r.oldPins++
		}
		return r.pins[0].pin
	}
	return r.pins[i-1].pin
}

func (r *replay) controller(p *catalog.Pin) *core.AdmissionController {
	c := r.ctrls[p]
	if c == nil {
		c = r.provider.Controller(core.ControllerConfig{Source: p, Load: r.load, Clock: r.clock})
		r.ctrls[p] = c
	}
	return c
}

// sample converts a recorded load line, once per sequence.
func (r *replay) sample(l *trace.Load) *core.LoadSample {
	if s, ok := r.conv[l.Sequence]; ok {
		return s
	}
	if len(r.conv) >= trace.KeptSamples {
		clear(r.conv)
	}
	s := &core.LoadSample{Sequence: l.Sequence, ObservedAt: r.at(l.ObservedT),
		CPUPressure: l.CPUPressure, MemoryPressure: l.MemoryPressure}
	for i := 0; i < len(l.QueueDelayNS) && i < policy.NumCellClasses; i++ {
		s.QueueDelay[i] = time.Duration(l.QueueDelayNS[i])
	}
	r.conv[l.Sequence] = s
	return s
}

// sampleBySeq is the recorded sample seq; when the trace no longer holds
// it, the latest one handed out, and the replay is inexact.
func (r *replay) sampleBySeq(seq uint64) (*core.LoadSample, bool) {
	if seq == 0 {
		return nil, false
	}
	if s, ok := r.conv[seq]; ok {
		return s, true
	}
	if l, ok := r.rd.Sample(seq); ok {
		return r.sample(&l), true
	}
	r.missingSamples++
	if r.latest != nil {
		return r.sample(r.latest), true
	}
	return nil, false
}

// prepareLoad sets what the load source answers for decision d.
func (r *replay) prepareLoad(d *trace.Decision) {
	v := r.load
	v.calls = 0
	switch {
	case d.Clock:
		v.first, v.firstOK = r.sampleBySeq(d.LoadSequence)
	case r.latest != nil:
		v.first, v.firstOK = r.sample(r.latest), true
	default:
		v.first, v.firstOK = nil, false
	}
	v.second, v.secondOK = v.first, v.firstOK
	if d.Committed {
		v.second, v.secondOK = r.sampleBySeq(d.CommitLoadSequence)
	}
}

func (r *replay) refusal(tenant, reason string) *Refusals {
	if !knownAnswers[reason] {
		reason = OtherAnswer
	}
	if _, ok := r.tenantIx[tenant]; !ok && !r.tracked[tenant] {
		if len(r.tracked) < trackedTenants {
			r.tracked[tenant] = true
		} else {
			tenant = OtherTenants
		}
	}
	k := [2]string{tenant, reason}
	c := r.refusals[k]
	if c == nil {
		c = &Refusals{Tenant: tenant, Reason: reason}
		r.refusals[k] = c
	}
	return c
}

// Edge answers the replay gives itself.
var (
	answerUnauthenticated = Answer{Answer: trace.AnswerUnauthenticated}
	answerNotAuthorized   = Answer{Answer: string(core.ReasonPrincipalNotAuthorized), Scope: string(core.ScopePrincipal), Dimension: string(core.DimIdentity)}
	answerNotAvailable    = Answer{Answer: string(core.ReasonRevisionNotAvailable), Scope: string(core.ScopeRevision), Dimension: string(core.DimRevision)}
)

func (r *replay) decide(l *trace.Line) {
	d := l.Decision
	recorded := Answer{Answer: d.Answer, Scope: d.Scope, Dimension: d.Dimension}
	cand, p := r.candidate(l, recorded)
	r.res.Decisions++
	if recorded.Admitted() {
		r.res.RecordedAdmitted++
	} else {
		r.refusal(d.Target.Tenant, recorded.Answer).Recorded++
	}
	if cand.Admitted() {
		r.res.CandidateAdmitted++
	} else {
		r.refusal(d.Target.Tenant, cand.Answer).Candidate++
	}
	if cand != recorded {
		r.res.Changed++
		if len(r.res.Changes) < KeptChanges {
			r.res.Changes = append(r.res.Changes, Change{Time: r.at(l.T), Order: l.Order,
				Tenant: shorten(d.Target.Tenant), Service: shorten(d.Target.Service), Route: shorten(d.Target.Route),
				ActivationID: shorten(d.ActivationID),
				Recorded:     Answer{Answer: shorten(recorded.Answer), Scope: shorten(recorded.Scope), Dimension: shorten(recorded.Dimension)},
				Candidate:    cand})
		}
	}
	if recorded.Admitted() {
		r.holdRecorded(l, p)
	}
	if p == nil {
		return
	}
	h := &held{adm: p}
	if recorded.Admitted() {
		r.permits[l.Order] = h
		return
	}
	// Refused by the node, admitted by the candidate: an estimated hold.
	r.res.Estimated++
	wall := p.Grant().Budget.WallTime.Value
	if r.pass == nil {
		if r.pass, r.passErr = firstPass(r.cfg); r.passErr != nil {
			r.pass = &pass{}
		}
	}
	dur, ok := r.pass.medians[routeKey(d.Target)]
	if !ok {
		dur = wall
	}
	r.clock.set(r.at(l.T), nil)
	if ep, err := p.StartExecution(); err == nil {
		h.adm, h.exe = nil, ep
	} else {
		return
	}
	heap.Push(&r.due, due{at: addSat(l.T, int64(dur)), h: h})
}

// candidate is the candidate's answer to a decision line, and its
// permit when it admits.
func (r *replay) candidate(l *trace.Line, recorded Answer) (Answer, *core.AdmissionPermit) {
	d := l.Decision
	edge := func(a Answer) Answer {
		if d.Stage == trace.StageEdge && recorded.Answer == a.Answer {
			return recorded // the edge's own scope and dimension
		}
		return a
	}
	switch recorded.Answer {
	case string(core.ReasonMetadataTooLarge), string(core.ReasonBudgetDimensionUnsupported):
		// Judged on what a trace never holds (claims, attributes, the
		// later-phase budget dimensions): the recorded answer stands.
		return recorded, nil
	}
	pr := d.Principal
	if pr == nil {
		return edge(answerUnauthenticated), nil
	}
	if pr.Admin || pr.Tenant != d.Target.Tenant {
		return edge(answerNotAuthorized), nil
	}
	kind, ok := policy.ParsePrincipalKind(pr.Kind)
	if !ok {
		return edge(answerNotAuthorized), nil
	}
	if _, ok := r.compiled.AuthorizedPrincipal(pr.Tenant, kind, pr.Subject); !ok || (kind == policy.ServicePrincipal && pr.Service == "") {
		return edge(answerNotAuthorized), nil
	}
	pin := r.pinFor(d.Generation, true)
	if pin == nil {
		return edge(answerNotAvailable), nil
	}
	rev, handle, err := pin.Resolve(catalog.Target{Tenant: d.Target.Tenant, Service: d.Target.Service, Route: d.Target.Route}, d.RoutingKey)
	if err != nil {
		return edge(answerNotAvailable), nil
	}
	req := &r.req
	*req = core.AdmissionRequest{
		ActivationID:    d.ActivationID,
		Principal:       core.Principal{Kind: kind, Subject: pr.Subject, Tenant: pr.Tenant, Service: pr.Service},
		Revision:        *rev,
		Handle:          handle,
		RequestedBudget: policy.Budget{CPUFuel: d.Budget.CPUFuel, MemoryBytes: d.Budget.MemoryBytes},
		PayloadBytes:    d.PayloadBytes,
		Priority:        d.Priority,
	}
	if d.Budget.WallTimeNS != nil {
		req.RequestedBudget.WallTime = policy.Some(time.Duration(*d.Budget.WallTimeNS))
	}
	if d.DeadlineUnixMS != nil {
		req.Deadline = policy.Some(*d.DeadlineUnixMS)
	}
	r.clock.set(r.at(l.T), d.Since)
	r.prepareLoad(d)
	p, err := r.controller(pin).Admit(req)
	if err != nil {
		var ce core.Error
		if errors.As(err, &ce) {
			return Answer{Answer: string(ce.Reason()), Scope: string(ce.Scope()), Dimension: string(ce.Dimension())}, nil
		}
		return Answer{Answer: err.Error()}, nil
	}
	return Answer{Answer: trace.AnswerAdmitted}, p
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

func (r *replay) startLine(l *trace.Line) {
	m := l.Move
	r.moveRecorded(m.Of, true, m.Refused)
	h := r.permits[m.Of]
	if h == nil {
		return
	}
	if h.adm != nil {
		r.clock.set(r.at(l.T), []int64{m.ElapsedNS})
		if ep, err := h.adm.StartExecution(); err == nil {
			h.adm, h.exe = nil, ep
		} else {
			h.adm = nil
		}
	}
	if m.Refused || (h.adm == nil && h.exe == nil) {
		h.release()
		delete(r.permits, m.Of)
	}
}

func (r *replay) releaseLine(l *trace.Line) {
	r.moveRecorded(l.Move.Of, false, true)
	if h := r.permits[l.Move.Of]; h != nil {
		h.release()
		delete(r.permits, l.Move.Of)
	}
}

func (r *replay) result() *Result {
	res := r.res
	res.Refusals = topTenants(r.refusals)
	res.Inexact = r.rd.Stats().Inexact()
	if r.noCatalog {
		res.Inexact = append(res.Inexact, "the trace has no catalog line")
	}
	if r.missingSamples > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions judged a load sample the trace did not hold", r.missingSamples))
	}
	if r.futurePins > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions resolved in a catalog generation whose change came later in the trace", r.futurePins))
	}
	if r.untracked > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d recorded admissions past the %d unreleased ones followed at once", r.untracked, maxOpenHolds))
	}
	if r.oldPins > 0 {
		res.Inexact = append(res.Inexact, fmt.Sprintf("%d decisions resolved in a catalog generation older than the %d kept", r.oldPins, KeptPins))
	}
	res.Exact = len(res.Inexact) == 0
	return &res
}

// topTenants is the refusal rows of the KeptTenants tenants with the most
// refusals, then the others' summed per reason under OtherTenants.
func topTenants(rows map[[2]string]*Refusals) []Refusals {
	totals := map[string]uint64{}
	for _, c := range rows {
		if c.Tenant != OtherTenants {
			totals[c.Tenant] += c.Recorded + c.Candidate
		}
	}
	names := make([]string, 0, len(totals))
	for name := range totals {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if totals[names[i]] != totals[names[j]] {
			return totals[names[i]] > totals[names[j]]
		}
		return names[i] < names[j]
	})
	kept := map[string]bool{}
	for _, name := range names[:min(len(names), KeptTenants)] {
		kept[name] = true
	}
	var out []Refusals
	others := map[string]*Refusals{}
	for _, c := range rows {
		if kept[c.Tenant] {
			row := *c
			row.Tenant = shorten(row.Tenant)
			out = append(out, row)
			continue
		}
		o := others[c.Reason]
		if o == nil {
			o = &Refusals{Tenant: OtherTenants, Reason: c.Reason}
			others[c.Reason] = o
		}
		o.Recorded += c.Recorded
		o.Candidate += c.Candidate
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		return a.Reason < b.Reason
	})
	reasons := make([]string, 0, len(others))
	for reason := range others {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		out = append(out, *others[reason])
	}
	return out
}
