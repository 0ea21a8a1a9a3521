package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Answer is one step's answer: JSON-ready values (bool, string, int64,
// uint64, nil, or a nested Answer).
type Answer map[string]any

// Result is one step's outcome.
type Result struct {
	Index      int
	Op         string
	Answer     Answer
	Mismatches []Mismatch
}

// heldPermit is what a permit name refers to.
type heldPermit struct {
	admission *core.AdmissionPermit
	execution *core.ExecutionPermit
}

// runner holds a scenario's live state: one provider (one ledger), one
// load state, the catalog, its named pins and the named permits.
type runner struct {
	s        *Scenario
	provider *core.LocalQuotaProvider
	base     *core.AdmissionController
	load     *core.NodeLoadState
	clock    *stepClock // reads the current step's time
	catalog  *catalog.Catalog
	pins     map[string]*catalog.Pin
	newest   *catalog.Pin
	permits  map[string]*heldPermit
	// every permit ever issued stays referenced until the run ends, so a
	// rebound name never lets the GC reclaim a reservation mid-scenario.
	issued  []*heldPermit
	tempDir string
}

// Run executes every step on the virtual clock and returns the results,
// comparing each answer with its expect. It fails only if the scenario
// cannot be set up (invalid policy or catalog).
func (s *Scenario) Run() ([]Result, error) {
	provider, err := core.NewLocalQuotaProvider(s.Policy)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	cat, err := catalog.FromFile(s.Catalog)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	r := &runner{
		s: s, provider: provider, clock: &stepClock{now: s.Epoch}, catalog: cat,
		pins: map[string]*catalog.Pin{}, permits: map[string]*heldPermit{},
	}
	r.load = core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, r.clock)
	r.base = provider.Controller(core.ControllerConfig{Load: r.load, Clock: r.clock})
	r.takePin("initial")
	defer func() {
		_ = r.catalog.Close()
		if r.tempDir != "" {
			_ = os.RemoveAll(r.tempDir)
		}
		for _, h := range r.issued {
			h.execution.Release()
			h.admission.Release()
		}
	}()
	results := make([]Result, 0, len(s.Steps))
	for i := range s.Steps {
		st := &s.Steps[i]
		now := s.Epoch.Add(st.At)
		r.clock.now = now
		answer := r.step(st, now)
		res := Result{Index: i, Op: st.Op, Answer: answer}
		if st.Expect != nil {
			res.Mismatches = Compare(st.Expect, answer)
		}
		results = append(results, res)
	}
	return results, nil
}

func (r *runner) takePin(name string) *catalog.Pin {
	p := r.catalog.Pin()
	r.pins[name] = p
	r.newest = p
	return p
}

func okAnswer() Answer { return Answer{"ok": true} }

func failure(err error) Answer {
	var e core.Error
	if errors.As(err, &e) {
		return Answer{"ok": false, "code": string(e.Code()), "scope": string(e.Scope()), "dimension": string(e.Dimension()),
			"reason": string(e.Reason()), "retryable": e.Retryable()}
	}
	return Answer{"ok": false, "error": err.Error()}
}

func (r *runner) step(st *Step, now time.Time) Answer {
	switch st.Op {
	case "load":
		sample := st.Sample
		sample.ObservedAtUnixMillis = addSaturating(r.s.Epoch.UnixMilli(), sample.ObservedAtUnixMillis)
		if err := r.load.PublishMillis(sample); err != nil {
			return failure(err)
		}
		return okAnswer()
	case "load-clear":
		r.load.Clear()
		return okAnswer()
	case "admit":
		return r.admit(st, now)
	case "schedulable":
		if err := r.permit(st.Permit).admission.EnsureSchedulableAt(now); err != nil {
			return failure(err)
		}
		return okAnswer()
	case "start":
		h := r.permit(st.Permit)
		e, err := h.admission.StartExecution()
		if err != nil {
			return failure(err)
		}
		h.execution = e
		return okAnswer()
	case "release":
		h := r.permit(st.Permit)
		released := h.execution.Release() || h.admission.Release()
		return Answer{"ok": true, "released": released}
	case "snapshot":
		return r.snapshot(st)
	case "deploy":
		g, err := r.catalog.Deploy(st.Deployment)
		if err != nil {
			return failure(err)
		}
		return Answer{"ok": true, "generation": g}
	case "delete":
		g, err := r.catalog.Delete(st.Tenant, st.Service)
		if err != nil {
			return failure(err)
		}
		return Answer{"ok": true, "generation": g}
	case "pin":
		return Answer{"ok": true, "generation": r.takePin(st.Pin).Generation()}
	case "restart":
		return r.restart()
	case "fleet-slice":
		until := time.UnixMilli(addSaturating(r.s.Epoch.UnixMilli(), st.ValidUntilMilli))
		if err := r.provider.PublishFleetSlice(st.Tenant, st.Slice, until); err != nil {
			return failure(err)
		}
		return okAnswer()
	case "fleet-withdraw":
		return Answer{"ok": true, "withdrawn": r.provider.WithdrawFleetSlice(st.Tenant)}
	}
	return Answer{"ok": false, "error": "unknown op"}
}

// addSaturating adds two millisecond counts, clamping instead of wrapping:
// an observation time beyond int64 is simply very far away.
func addSaturating(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

// permit returns what a name refers to; an unknown name refers to a
// never-issued (zero) permit, which answers permit-not-live.
func (r *runner) permit(name string) *heldPermit {
	if h, ok := r.permits[name]; ok {
		return h
	}
	return &heldPermit{admission: &core.AdmissionPermit{}}
}

func (r *runner) admit(st *Step, now time.Time) Answer {
	pin := r.newest
	if st.Pin != "" {
		p, ok := r.pins[st.Pin]
		if !ok {
			return Answer{"ok": false, "error": fmt.Sprintf("no pin named %q", st.Pin)}
		}
		pin = p
	}
	req := st.Request.Request // a copy: the step stays reusable
	rev, handle, err := pin.Resolve(st.Request.Target, st.Request.RoutingKey)
	if err != nil {
		// The adapter answers an unresolvable target like a missing revision.
		return failure(core.ErrRevisionNotAvailable)
	}
	st.Tamper.apply(rev)
	req.Revision, req.Handle = *rev, handle
	p, err := r.base.WithPolicySource(pin).Admit(&req)
	if err != nil {
		return failure(err)
	}
	h := &heldPermit{admission: p}
	r.permits[st.Permit] = h
	r.issued = append(r.issued, h)
	b := p.Grant().Budget
	o := p.Grant().Obligations
	return Answer{
		"ok": true, "cell_class": o.CellClass.String(), "queue_class": o.QueueClass, "trust_class": o.TrustClass,
		"priority": uint64(o.Priority),
		"budget": Answer{"cpu_fuel": b.CPUFuel, "memory_bytes": b.MemoryBytes,
			"wall_time_ms": b.WallTime.Value.Milliseconds()},
		"deadline_at_ms": p.Grant().Deadline.Sub(r.s.Epoch).Milliseconds(),
		"generation":     p.Grant().Revision.Generation,
	}
}

func (r *runner) snapshot(st *Step) Answer {
	pr := r.provider
	quota := func(s core.QuotaSnapshot) Answer {
		return Answer{"ok": true, "live": s.Live, "queued": s.Queued, "cpu_fuel": s.CPUFuel,
			// Reservations never reset on a timer: the format keeps the key, always null.
			"memory_bytes": s.MemoryBytes, "reset_at_unix_ms": nil}
	}
	unknown := Answer{"ok": false, "error": fmt.Sprintf("no %s named %q", st.Scope, st.Name)}
	switch st.Scope {
	case "node":
		return quota(pr.NodeSnapshot())
	case "tenant":
		if s, ok := pr.TenantSnapshot(st.Name); ok {
			return quota(s)
		}
	case "trust-class":
		if s, ok := pr.TrustClassSnapshot(st.Name); ok {
			return quota(s)
		}
	case "queue-class":
		if q, _, ok := pr.QueueClassSnapshot(st.Name); ok {
			return Answer{"ok": true, "queued": q}
		}
	case "cell-class":
		if class, ok := policy.ParseCellClass(st.Name); ok {
			if live, ok := pr.CellClassSnapshot(class); ok {
				return Answer{"ok": true, "live": live}
			}
		}
	case "fleet":
		slice, until, published, ok := pr.FleetSlice(st.Name)
		if !ok {
			return Answer{"ok": false, "error": fmt.Sprintf("no fleet-limited tenant named %q", st.Name)}
		}
		if !published {
			return Answer{"ok": true, "published": false}
		}
		return Answer{"ok": true, "published": true, "slice": slice, "valid_until_ms": until.Sub(r.s.Epoch).Milliseconds()}
	}
	return unknown
}

// restart writes the catalog to a store and reopens it, as a process
// restart would; pins taken before stay valid and the ledger is kept.
func (r *runner) restart() Answer {
	if r.tempDir == "" {
		dir, err := os.MkdirTemp("", "admission-scenario-")
		if err != nil {
			return failure(err)
		}
		r.tempDir = dir
	}
	dir, err := os.MkdirTemp(r.tempDir, "store-")
	if err != nil {
		return failure(err)
	}
	if err := r.catalog.WriteStore(dir); err != nil {
		return failure(err)
	}
	// The process that "restarts" lets go of its catalog first, as a real
	// one would: its store lock goes, and pins already taken keep serving.
	if err := r.catalog.Close(); err != nil {
		return failure(err)
	}
	reopened, err := catalog.Open(dir)
	if err != nil {
		return failure(err)
	}
	r.catalog = reopened
	return okAnswer()
}

// stepClock is the virtual clock: it reads the time of the step being run,
// so that the load state judges a publish against the step's time.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time                  { return c.now }
func (c *stepClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }
