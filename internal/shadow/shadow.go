package shadow

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/coretrace"
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
	// in answers a decision's readings from its line; inputs is the
	// core.Inputs the candidate decides with: in, or a test's wrapper.
	in     coretrace.Replaying
	inputs core.Inputs

	cat      *catalog.Catalog
	override bool
	pins     []pinAt // ascending by gen
	ctrls    map[*catalog.Pin]*core.AdmissionController

	permits map[uint64]*held
	due     dueHeap
	latest  *trace.Load // the latest sample handed out in order
	// fleet is each fleet-limited tenant's latest slice writes (fleet.go).
	fleet map[string]*fleetHistory
	conv  map[uint64]*core.LoadSample

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
		clock: &vclock{}, ctrls: map[*catalog.Pin]*core.AdmissionController{},
		permits: map[uint64]*held{}, conv: map[uint64]*core.LoadSample{}, refusals: map[[2]string]*Refusals{}, tracked: map[string]bool{},
		tenantIx: map[string]int{}, trustIx: map[string]int{}, queueIx: map[string]int{}, recHolds: map[uint64]*recHold{},
	}
	r.inputs = &r.in
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

// addSat is a+b, held at the int64 bounds instead of wrapping: a trace's
// times may be anything, and time must never run backwards (a sample
// time that wrapped would be taken forever).
func addSat(a, b int64) int64 { return coretrace.AddSaturating(a, b) }

// at is the wall time of T t.
func (r *replay) at(t int64) time.Time { return coretrace.At(r.start, t) }

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
	case trace.KindFleet:
		r.fleetLine(l.Fleet)
	case trace.KindDecision:
		r.decide(l)
	case trace.KindStart:
		r.startLine(l)
	case trace.KindRelease:
		r.releaseLine(l)
	}
	return nil
}

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
	r.clock.set(r.at(l.T), 0)
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
	refusal, in, ok := r.edgeChecks(l, recorded)
	if !ok {
		return refusal, nil
	}
	d := l.Decision
	coretrace.Request(&r.req, d, in.principal, in.rev, in.handle)
	r.in.Set(d, r.at(l.T), r)
	if d.Fleet != nil {
		defer r.judgeFleet(d.Target.Tenant, d.Fleet.Writes)()
	}
	p, err := r.controller(in.pin).AdmitWith(&r.req, r.inputs)
	if err != nil {
		return answerOf(err), nil
	}
	return Answer{Answer: trace.AnswerAdmitted}, p
}
