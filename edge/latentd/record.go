package latentd

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/internal/coretrace"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// Recording (Config.RecordPath, `latentd -record FILE`): every admission
// decision, and everything a replay needs besides it, goes to a trace
// file (internal/trace, docs/record-and-shadow.md).
//
// The file begins with a header, then a catalog line with the whole
// catalog New started with. After them come, in the node's one total
// order (the recording provider's ledger order, each line's Order):
//
//   - deploy and undeploy lines, for every deploy and delete that took
//     effect (Order drawn after the catalog changed and before the new
//     view is published, under adminMu, so that every decision on the
//     new generation has a later order);
//   - load lines, for every load sample the node accepted (Order drawn
//     before the publish, so that a decision that judged the sample comes
//     after it);
//   - decision lines, one per admission decision: stage "edge" for what
//     latentd answered before asking admission (an unknown or missing
//     token, an administrator's or another tenant's invocation, a
//     principal the policy does not list, a route that resolves to
//     nothing), stage "core" for admission's answers;
//   - start and release lines, for the moves of each admitted permit.
//
// A request that fails before any admission question (a malformed
// header, an unreadable body, "the deployment changed while the request
// was resolved; retry it") is not a decision and writes nothing.
//
// T is nanoseconds on the monotonic clock since the recording started
// (the header's StartUnixNano): a decision's is its first clock reading
// when it read the clock, else when the line was made; a start's or a
// release's is when the journal was told of it (time.Since the start).
//
// A decision the edge makes before the invocation headers are read (an
// unknown token, a principal refused) records them as the headers parse
// (a request without Latent-Activation-Id gets the generated ID it would
// have had), or none when they do not; its payload size is 0: the body is
// never read.
//
// A trace holds no token, no payload and no claim: a principal is its
// kind, subject, tenant and service.

// recorder is a recording node's half of the trace: the writer, the
// recording's start, and the provider whose order every line takes.
type recorder struct {
	w        *trace.Writer
	start    time.Time
	provider *core.LocalQuotaProvider
	// load is the node's load state, which its controllers read and a
	// decision's readings read too (on the system clock, as they do).
	load core.NodeLoadSource
	// parts holds the *decisionParts the writer is done with (its
	// Recycle), for the next decisions.
	parts sync.Pool
}

// Moved is the provider's core.Journal: starts and releases. A move is
// copied into the writer's queue (AddMove): nothing to allocate or
// recycle.
func (r *recorder) Moved(m core.LedgerMove) {
	kind, mv := coretrace.MoveOf(m)
	r.w.AddMove(kind, m.Order, int64(time.Since(r.start)), mv)
}

// now is T for an event that happens as the line is made.
func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// open starts the trace file; the provider must be set.
func (r *recorder) open(cfg Config) error {
	w, err := trace.NewWriter(trace.WriterConfig{Path: cfg.RecordPath, MaxBytes: cfg.RecordMaxBytes,
		StartUnixNano: r.start.UnixNano(), PolicySHA256: cfg.RecordPolicySHA256, NextOrder: r.provider.NextOrder,
		Logger: cfg.Logger.With("component", "record"), Create: cfg.recordCreate, Recycle: r.recycle})
	if err != nil {
		return fmt.Errorf("latentd: record: %w", err)
	}
	r.w = w
	return nil
}

// catalog writes the catalog line: every deployment of pin, and c's
// capacity, in the catalog file's form; a file longer than
// trace.PartBytes in parts, each waiting for room in the writer's queue
// (New has not started serving: nothing else is recorded yet).
func (r *recorder) catalog(c *catalog.Catalog, pin *catalog.Pin) error {
	f := catalog.File{Capacity: c.Capacity()}
	for _, key := range pin.Deployments() {
		if d, _, ok := pin.Deployment(key.Tenant, key.Service); ok {
			f.Deployments = append(f.Deployments, d)
		}
	}
	data, err := catalog.EncodeFile(f)
	if err != nil {
		return fmt.Errorf("latentd: record: the catalog: %w", err)
	}
	if len(data) > trace.MaxPayloadBytes {
		r.w.Add(trace.Line{Kind: trace.KindDropped, Order: r.provider.NextOrder(), T: r.now(), Dropped: &trace.Dropped{Lines: 1}})
		return nil
	}
	parts := trace.Split(data)
	for i, p := range parts {
		l := trace.Line{Kind: trace.KindCatalog, Order: r.provider.NextOrder(), T: r.now(),
			Catalog: &trace.Catalog{Generation: pin.Generation(), File: p}}
		if len(parts) > 1 {
			l.Catalog.Part, l.Catalog.Parts = uint32(i), uint32(len(parts))
		}
		r.w.AddWait(l)
	}
	return nil
}

// deployed writes a deploy line for d, deployed at gen; in parts when its
// encoding is longer than trace.PartBytes. A deployment that does not
// encode (never one that passed validation) writes a dropped line
// instead, so the trace says it cannot be replayed exactly.
func (r *recorder) deployed(gen uint64, d catalog.Deployment) error {
	data, err := catalog.EncodeDeployment(d)
	if err != nil {
		r.w.Add(trace.Line{Kind: trace.KindDropped, Order: r.provider.NextOrder(), T: r.now(), Dropped: &trace.Dropped{Lines: 1}})
		return err
	}
	parts := trace.Split(data)
	for i, p := range parts {
		l := trace.Line{Kind: trace.KindDeploy, Order: r.provider.NextOrder(), T: r.now(),
			Change: &trace.Change{Generation: gen, Deployment: p}}
		if len(parts) > 1 {
			l.Change.DeploymentPart, l.Change.DeploymentParts = uint32(i), uint32(len(parts))
		}
		r.w.Add(l)
	}
	return nil
}

// undeployed writes an undeploy line.
func (r *recorder) undeployed(gen uint64, tenant, service string) {
	r.w.Add(trace.Line{Kind: trace.KindUndeploy, Order: r.provider.NextOrder(), T: r.now(),
		Change: &trace.Change{Generation: gen, Tenant: tenant, Service: service}})
}

// loaded writes a load line for an accepted sample, at order.
func (r *recorder) loaded(s *core.LoadSample, order uint64) {
	r.w.Add(trace.Line{Kind: trace.KindLoad, Order: order, T: r.now(), Load: coretrace.LoadOf(s, r.start)})
}

// fleetWrote records a write of tenant's fleet slice, the writes-th,
// whose order was drawn before it: a publish of slice valid until
// validUntil, or a withdrawal when published is false.
func (r *recorder) fleetWrote(order uint64, tenant string, published bool, slice int64, validUntil time.Time, writes uint64) {
	f := &trace.Fleet{Tenant: tenant, Published: published, Writes: writes}
	if published {
		f.Slice, f.ValidUntilT = slice, int64(validUntil.Sub(r.start))
	}
	r.w.Add(trace.Line{Kind: trace.KindFleet, Order: order, T: r.now(), Fleet: f})
}

// recordingTarget is the sampler's target on a recording node: the
// node's load state, and a load line for every sample it accepts.
type recordingTarget struct {
	state *core.NodeLoadState
	rec   *recorder
}

// Publish draws the sample's order before it publishes, so that every
// decision that judges the sample has a later order than its line, and a
// reader that hands lines out in order has read the sample before any
// decision that names it. A refused sample leaves its order unused.
func (t recordingTarget) Publish(s core.LoadSample) error {
	order := t.rec.provider.NextOrder()
	if err := t.state.Publish(s); err != nil {
		return err
	}
	t.rec.loaded(&s, order)
	return nil
}

// principalOf is p as a trace records it: never its token.
func principalOf(p Principal) *trace.Principal {
	out := new(trace.Principal)
	setPrincipal(out, p)
	return out
}

// setPrincipal puts p in out as a trace records it.
func setPrincipal(out *trace.Principal, p Principal) {
	*out = trace.Principal{Subject: p.Subject, Tenant: p.Tenant, Service: p.Service, Admin: p.Admin}
	if p.Kind != 0 {
		out.Kind = p.Kind.String()
	}
}

// requestOf is what a decision line says of the request.
func requestOf(r *http.Request, inv *invocation, payloadBytes uint64) trace.Decision {
	var d trace.Decision
	setRequest(&d, new([2]int64), r, inv, payloadBytes)
	return d
}

// setRequest puts what a decision line says of the request in d; the
// requested wall time and the deadline, when set, are kept in times and
// d points at them.
func setRequest(d *trace.Decision, times *[2]int64, r *http.Request, inv *invocation, payloadBytes uint64) {
	setTarget(d, r, inv)
	d.PayloadBytes = payloadBytes
	if inv == nil {
		return
	}
	d.ActivationID, d.Priority = inv.activationID, inv.priority
	d.Budget = trace.Budget{CPUFuel: inv.budget.CPUFuel, MemoryBytes: inv.budget.MemoryBytes}
	if inv.budget.WallTime.Set {
		times[0] = int64(inv.budget.WallTime.Value)
		d.Budget.WallTimeNS = &times[0]
	}
	if inv.deadline.Set {
		times[1] = inv.deadline.Value
		d.DeadlineUnixMS = &times[1]
	}
}

// setTarget puts the invocation's path and routing key in d.
func setTarget(d *trace.Decision, r *http.Request, inv *invocation) {
	d.Target = trace.Target{Tenant: r.PathValue("tenant"), Service: r.PathValue("service"), Route: r.PathValue("route")}
	if inv != nil {
		d.RoutingKey = inv.routingKey
	}
}

// edgeUnauthenticated records a request without a token the node knows.
// Its names come from anyone: each is recorded only when it fits the
// policy's maximum_identifier_bytes (boundedNames).
func (r *recorder) edgeUnauthenticated(req *http.Request, settings policy.NodeSettings) {
	d := requestOf(req, headersOf(req, settings.BudgetCeiling), 0)
	boundNames(&d, settings.MaximumIdentifierBytes)
	d.Stage, d.Answer = trace.StageEdge, trace.AnswerUnauthenticated
	r.w.Add(trace.Line{Kind: trace.KindDecision, Order: r.provider.NextOrder(), T: r.now(), Decision: &d})
}

// edgeDenied records a principal refused before resolution, its names
// bounded as an unauthenticated request's are.
func (r *recorder) edgeDenied(req *http.Request, p Principal, settings policy.NodeSettings, refusal error) {
	d := requestOf(req, headersOf(req, settings.BudgetCeiling), 0)
	boundNames(&d, settings.MaximumIdentifierBytes)
	d.Stage, d.Principal = trace.StageEdge, principalOf(p)
	setAnswer(&d, refusal)
	r.w.Add(trace.Line{Kind: trace.KindDecision, Order: r.provider.NextOrder(), T: r.now(), Decision: &d})
}

// boundNames empties every name of d longer than max bytes (the target's
// tenant, service and route, the activation ID and the routing key) in a
// decision the edge made before the request was validated, so that a
// request's size cannot make its line long: none such name is an
// identifier the policy or a catalog can hold, so a replay answers it
// the same without it.
func boundNames(d *trace.Decision, max uint32) {
	for _, s := range []*string{&d.Target.Tenant, &d.Target.Service, &d.Target.Route, &d.ActivationID, &d.RoutingKey} {
		if uint64(len(*s)) > uint64(max) {
			*s = ""
		}
	}
}

// edgeUnresolved records a route that resolves to nothing.
func (r *recorder) edgeUnresolved(req *http.Request, p Principal, inv *invocation, payloadBytes, generation uint64) {
	d := requestOf(req, inv, payloadBytes)
	d.Stage, d.Principal, d.Generation = trace.StageEdge, principalOf(p), generation
	setAnswer(&d, core.ErrRevisionNotAvailable)
	r.w.Add(trace.Line{Kind: trace.KindDecision, Order: r.provider.NextOrder(), T: r.now(), Decision: &d})
}

// headersOf parses the invocation headers for the record of a decision
// made before they were read; nil when they are malformed.
func headersOf(req *http.Request, ceiling policy.NodeBudgetCeiling) *invocation {
	inv, herr := parseInvocation(req.Header, ceiling)
	if herr != nil {
		return nil
	}
	return &inv
}

// setAnswer puts err's reason, scope and dimension in d, or "admitted"
// when err is nil.
func setAnswer(d *trace.Decision, err error) { coretrace.SetAnswer(d, err) }

// decisionParts are a core decision's readings and the parts of its
// line, in one allocation: the decision, what it points at, and the
// readings (which hold the line's clock readings and fleet slice).
type decisionParts struct {
	in    coretrace.Recording
	d     trace.Decision
	p     trace.Principal
	times [2]int64 // the requested wall time and deadline (SetRequest)
}

// recycle is the writer's Recycle: a decision's parts, written, are
// reused.
func (r *recorder) recycle(owner any) {
	if o, ok := owner.(*decisionParts); ok {
		r.parts.Put(o)
	}
}

// newParts is a decisionParts whose readings, reading the node's clock
// and load, and decision are zero: one the writer is done with, or a new
// one. (admit sets the principal whole, and the times
// it points at.)
func (r *recorder) newParts() *decisionParts {
	parts, ok := r.parts.Get().(*decisionParts)
	if !ok {
		parts = new(decisionParts)
	}
	parts.in.Reset(deadline.System{}, r.load)
	parts.d = trace.Decision{}
	return parts
}

// admit is Admit on a recording node: AdmitWith the decision's readings
// (coretrace.Recording, on the node's clock and load state, as its
// controllers read), and the decision's line, its parts in one
// decisionParts that the writer hands back once it has written the line.
// target is the invocation's path, which the edge resolved.
func (r *recorder) admit(v *view, target catalog.Target, areq *core.AdmissionRequest, p Principal, inv *invocation) (*core.AdmissionPermit, error) {
	parts := r.newParts()
	permit, err := v.controller.AdmitWith(areq, &parts.in)
	d := &parts.d
	d.Target, d.RoutingKey = trace.Target(target), inv.routingKey
	coretrace.SetRequest(d, areq, &parts.times)
	setPrincipal(&parts.p, p)
	d.Stage, d.Principal, d.Generation = trace.StageCore, &parts.p, v.pin.Generation()
	order, t, clock := parts.in.Put(d, r.start)
	if !clock {
		t = r.now()
	}
	setAnswer(d, err)
	if !r.w.Add(trace.Line{Kind: trace.KindDecision, Order: order, T: t, Decision: d, Owner: parts}) {
		r.parts.Put(parts)
	}
	return permit, err
}

// recordMetrics registers the recorder's counters on reg.
func (r *recorder) recordMetrics(reg *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "latent_record_lines_total",
			Help: "Trace lines the recorder wrote (-record)."}, func() float64 { return float64(r.w.Written()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "latent_record_dropped_lines_total",
			Help: "Trace lines the recorder dropped because its buffer was full (-record); a trace with any cannot be replayed exactly."},
			func() float64 { return float64(r.w.Dropped()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "latent_record_write_errors_total",
			Help: "Times the recording stopped on a trace write error (-record): a full disk; it is retried every second."},
			func() float64 { return float64(r.w.Failures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "latent_record_stopped",
			Help: "1 while the recording is stopped on a write error (-record), else 0."},
			func() float64 {
				if r.w.Err() != nil {
					return 1
				}
				return 0
			}),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
