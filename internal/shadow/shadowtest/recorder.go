// Package shadowtest makes decision traces for tests and benchmarks the
// way a recording node does: a core recording provider
// ([core.NewRecordingProvider]) decides on a virtual clock, and every
// decision (read through a [coretrace.Recording]), move (a
// [core.Journal]), load sample and catalog change becomes a trace line,
// mapped by internal/coretrace as latentd's recorder maps them.
package shadowtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/coretrace"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// Clock is a virtual clock: Now is Start plus the elapsed time, Since
// measures against it. When Step is set, every reading moves the clock
// on by Step once it is read, as a node's clock moves while a decision
// runs.
type Clock struct {
	Start   time.Time
	Elapsed time.Duration
	Step    time.Duration
}

// Now returns the virtual time.
func (c *Clock) Now() time.Time {
	t := c.Start.Add(c.Elapsed)
	c.Elapsed += c.Step
	return t
}

// Since returns the virtual time since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Recorder records a trace of decisions made on a recording provider.
type Recorder struct {
	Clock    *Clock
	Provider *core.LocalQuotaProvider
	Load     *core.NodeLoadState
	Catalog  *catalog.Catalog
	Lines    []trace.Line
	// Inputs, when set, is what a decision reads through instead of its
	// coretrace.Recording (a test's wrapper of it).
	Inputs func(*coretrace.Recording) core.Inputs

	ctrls   map[*catalog.Pin]*core.AdmissionController
	loadSeq uint64
}

// NewRecorder starts a recording under p with the catalog file
// catalogJSON (which it records as the catalog line).
func NewRecorder(p *policy.NodeAdmissionPolicy, catalogJSON []byte) (*Recorder, error) {
	r := &Recorder{Clock: &Clock{Start: time.Unix(1_700_000_000, 0)}, ctrls: map[*catalog.Pin]*core.AdmissionController{}}
	var err error
	if r.Provider, err = core.NewRecordingProvider(p, journal{r}); err != nil {
		return nil, err
	}
	r.Load = core.NewNodeLoadState(r.Provider.Policy().Node().Overload.MaximumObservationAge, r.Clock)
	f, err := catalog.DecodeCatalogFile(catalogJSON, true)
	if err != nil {
		return nil, err
	}
	if r.Catalog, err = catalog.FromFile(f); err != nil {
		return nil, err
	}
	r.Lines = append(r.Lines, trace.Line{Kind: trace.KindCatalog, Order: r.Provider.NextOrder(),
		Catalog: &trace.Catalog{Generation: r.Catalog.Generation(), File: catalogJSON}})
	return r, nil
}

type journal struct{ r *Recorder }

func (j journal) Moved(m core.LedgerMove) {
	kind, mv := coretrace.MoveOf(m)
	j.r.Lines = append(j.r.Lines, trace.Line{Kind: kind, Order: m.Order, T: int64(j.r.Clock.Elapsed), Move: &mv})
}

// Publish publishes a load sample observed now and records it.
func (r *Recorder) Publish(cpu, memory float64, queueDelay time.Duration) error {
	r.loadSeq++
	s := core.LoadSample{Sequence: r.loadSeq, ObservedAt: r.Clock.Now(), CPUPressure: cpu, MemoryPressure: memory}
	for i := range s.QueueDelay {
		s.QueueDelay[i] = queueDelay
	}
	if err := r.Load.Publish(s); err != nil {
		return err
	}
	r.Lines = append(r.Lines, trace.Line{Kind: trace.KindLoad, Order: r.Provider.NextOrder(), T: int64(r.Clock.Elapsed),
		Load: coretrace.LoadOf(&s, r.Clock.Start)})
	return nil
}

// Deploy deploys d and records it.
func (r *Recorder) Deploy(d catalog.Deployment, deploymentJSON []byte) error {
	gen, err := r.Catalog.Deploy(d)
	if err != nil {
		return err
	}
	r.Lines = append(r.Lines, trace.Line{Kind: trace.KindDeploy, Order: r.Provider.NextOrder(), T: int64(r.Clock.Elapsed),
		Change: &trace.Change{Generation: gen, Deployment: deploymentJSON}})
	return nil
}

// Request is one request to record.
type Request struct {
	Principal    *trace.Principal // nil: unauthenticated
	Target       trace.Target
	RoutingKey   string
	ActivationID string
	Priority     uint32
	CPUFuel      uint64
	MemoryBytes  uint64
	WallTime     time.Duration // 0: none requested
	Deadline     time.Time     // zero: none
	PayloadBytes uint64
}

// Admit decides req as latentd does (the edge's checks, the route, then
// admission) and records the decision; the permit when admitted.
func (r *Recorder) Admit(req Request) *core.AdmissionPermit {
	d := &trace.Decision{Stage: trace.StageEdge, Principal: req.Principal, Target: req.Target, RoutingKey: req.RoutingKey,
		ActivationID: req.ActivationID, Priority: req.Priority, PayloadBytes: req.PayloadBytes,
		Budget: trace.Budget{CPUFuel: req.CPUFuel, MemoryBytes: req.MemoryBytes}}
	if req.WallTime > 0 {
		w := int64(req.WallTime)
		d.Budget.WallTimeNS = &w
	}
	if !req.Deadline.IsZero() {
		ms := req.Deadline.UnixMilli()
		d.DeadlineUnixMS = &ms
	}
	line := trace.Line{Kind: trace.KindDecision, T: int64(r.Clock.Elapsed), Decision: d}
	edge := func(answer string) *core.AdmissionPermit {
		line.Order, d.Answer = r.Provider.NextOrder(), answer
		r.Lines = append(r.Lines, line)
		return nil
	}
	pr := req.Principal
	if pr == nil {
		return edge(trace.AnswerUnauthenticated)
	}
	kind, ok := policy.ParsePrincipalKind(pr.Kind)
	if _, listed := r.Provider.Policy().AuthorizedPrincipal(pr.Tenant, kind, pr.Subject); !ok || !listed || pr.Admin || pr.Tenant != req.Target.Tenant {
		return edge(string(core.ReasonPrincipalNotAuthorized))
	}
	pin := r.Catalog.Pin()
	d.Generation = pin.Generation()
	rev, handle, err := pin.Resolve(catalog.Target{Tenant: req.Target.Tenant, Service: req.Target.Service, Route: req.Target.Route}, req.RoutingKey)
	if err != nil {
		return edge(string(core.ReasonRevisionNotAvailable))
	}
	ar := core.AdmissionRequest{ActivationID: req.ActivationID,
		Principal: core.Principal{Kind: kind, Subject: pr.Subject, Tenant: pr.Tenant, Service: pr.Service},
		Revision:  *rev, Handle: handle, PayloadBytes: req.PayloadBytes, Priority: req.Priority,
		RequestedBudget: policy.Budget{CPUFuel: req.CPUFuel, MemoryBytes: req.MemoryBytes}}
	if req.WallTime > 0 {
		ar.RequestedBudget.WallTime = policy.Some(req.WallTime)
	}
	if !req.Deadline.IsZero() {
		ar.Deadline = policy.Some(req.Deadline.UnixMilli())
	}
	ctrl := r.ctrls[pin]
	if ctrl == nil {
		ctrl = r.Provider.Controller(core.ControllerConfig{Source: pin, Load: r.Load, Clock: r.Clock})
		r.ctrls[pin] = ctrl
	}
	rec := &coretrace.Recording{Clock: r.Clock, Load: r.Load}
	var in core.Inputs = rec
	if r.Inputs != nil {
		in = r.Inputs(rec)
	}
	p, err := ctrl.AdmitWith(&ar, in)
	d.Stage = trace.StageCore
	coretrace.SetRequest(d, &ar, new([2]int64))
	order, t, clock := rec.Put(d, r.Clock.Start)
	line.Order = order
	if clock {
		line.T = t
	}
	coretrace.SetAnswer(d, err)
	r.Lines = append(r.Lines, line)
	return p
}

// Write writes the trace into path: a header, then the lines.
func (r *Recorder) Write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	if err := enc.Encode(trace.Line{Kind: trace.KindHeader, Header: &trace.Header{Version: trace.Version,
		StartUnixNano: r.Clock.Start.UnixNano(), PolicySHA256: "0000"}}); err != nil {
		return err
	}
	for i := range r.Lines {
		if err := enc.Encode(&r.Lines[i]); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// Workload generates a deterministic mixed workload into a recorder:
// Decisions requests over the testdata catalog (testdata/catalog/good.json)
// and policy (testdata/policy/node.json), about one every millisecond,
// each admitted one started within a millisecond and released after a
// route-dependent duration, and a load sample every SampleEvery requests.
type Workload struct {
	Decisions   int
	SampleEvery int
	Seed        uint64
}

type inflight struct {
	adm      *core.AdmissionPermit
	exe      *core.ExecutionPermit
	startAt  time.Duration
	endAt    time.Duration
	finished bool
}

// Run records w into r.
func (w Workload) Run(r *Recorder) error {
	rng := rand.New(rand.NewPCG(w.Seed, 7))
	if w.SampleEvery <= 0 {
		w.SampleEvery = 1000
	}
	type route struct {
		p      trace.Principal
		t      trace.Target
		mean   time.Duration
		weight int
	}
	routes := []route{
		{trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}, trace.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, 8 * time.Millisecond, 30},
		{trace.Principal{Kind: "service", Subject: "billing", Tenant: "acme", Service: "billing"}, trace.Target{Tenant: "acme", Service: "thumbs", Route: "split"}, 4 * time.Millisecond, 15},
		{trace.Principal{Kind: "user", Subject: "bob", Tenant: "globex"}, trace.Target{Tenant: "globex", Service: "render", Route: "tiny"}, 6 * time.Millisecond, 25},
		{trace.Principal{Kind: "user", Subject: "carol", Tenant: "initech"}, trace.Target{Tenant: "initech", Service: "jobs", Route: "run"}, 5 * time.Millisecond, 15},
		{trace.Principal{Kind: "user", Subject: "dave", Tenant: "umbrella"}, trace.Target{Tenant: "umbrella", Service: "jobs", Route: "run"}, 5 * time.Millisecond, 3},
		{trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}, trace.Target{Tenant: "acme", Service: "thumbs", Route: "armonly"}, 5 * time.Millisecond, 3},
		{trace.Principal{Kind: "user", Subject: "mallory", Tenant: "acme"}, trace.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, 5 * time.Millisecond, 3},
		{trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}, trace.Target{Tenant: "acme", Service: "thumbs", Route: "nowhere"}, 5 * time.Millisecond, 3},
	}
	total := 0
	for _, rt := range routes {
		total += rt.weight
	}
	var live []*inflight
	for i := 0; i < w.Decisions; i++ {
		if i%w.SampleEvery == 0 {
			cpu := 0.3 + 0.5*rng.Float64()
			if rng.IntN(6) == 0 {
				cpu = 0.95
			}
			if err := r.Publish(cpu, 0.4, time.Duration(rng.IntN(5))*time.Millisecond); err != nil {
				return err
			}
		}
		r.Clock.Elapsed += time.Duration(rng.IntN(2_000_000))
		// Moves due by now, in order of the time they are due.
		kept := live[:0]
		for _, f := range live {
			if f.exe == nil && f.startAt <= r.Clock.Elapsed {
				if ep, err := f.adm.StartExecution(); err == nil {
					f.exe = ep
				} else {
					f.finished = true
				}
			}
			if f.exe != nil && f.endAt <= r.Clock.Elapsed {
				f.exe.Release()
				f.finished = true
			}
			if !f.finished {
				kept = append(kept, f)
			}
		}
		live = kept
		pick := rng.IntN(total)
		var rt route
		for _, c := range routes {
			if pick < c.weight {
				rt = c
				break
			}
			pick -= c.weight
		}
		p := rt.p
		req := Request{Principal: &p, Target: rt.t, RoutingKey: fmt.Sprintf("k%d", rng.IntN(100)),
			ActivationID: fmt.Sprintf("a%d", i), Priority: uint32(rng.IntN(5)),
			CPUFuel: 100_000_000, MemoryBytes: 8 << 20, PayloadBytes: uint64(rng.IntN(4096))}
		switch rng.IntN(50) {
		case 0:
			req.Principal = nil
		case 1:
			req.Deadline = r.Clock.Now().Add(-time.Second)
		case 2:
			req.WallTime = 2 * time.Millisecond
		}
		adm := r.Admit(req)
		if adm == nil {
			continue
		}
		d := time.Duration(float64(rt.mean) * (0.5 + rng.Float64()))
		start := time.Duration(rng.IntN(1_000_000))
		live = append(live, &inflight{adm: adm, startAt: r.Clock.Elapsed + start, endAt: r.Clock.Elapsed + start + d})
	}
	// Drain: everything still held is started and released.
	for _, f := range live {
		r.Clock.Elapsed += time.Microsecond
		if f.exe == nil {
			if ep, err := f.adm.StartExecution(); err == nil {
				f.exe = ep
			}
		}
		if f.exe != nil {
			f.exe.Release()
		}
	}
	return nil
}
