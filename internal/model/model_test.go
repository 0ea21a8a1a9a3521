package model

import (
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var epoch = time.UnixMilli(1767225600000)

func at(ms int64) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }

var roomy = policy.Limits{MaxLiveActivations: 100, MaxQueuedReservations: 100, MaxReservedCPUFuel: 1000, MaxReservedMemoryBytes: 1000}

// testPolicy is a small node: one tenant (acme, user alice), one trust
// class, two queue classes, tiny (4 bytes, parallelism 1) and standard
// (16 bytes, parallelism 2) cells.
func testPolicy() *policy.NodeAdmissionPolicy {
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement:           policy.Placement{Architecture: "x86_64", Region: "eu", Zone: "a"},
			Backends:            []string{"wasm"},
			StateModels:         []string{"stateless"},
			BudgetCeiling:       policy.NodeBudgetCeiling{CPUFuel: 100, MemoryBytes: 64, WallTime: time.Second},
			Limits:              roomy,
			MaximumPayloadBytes: 10, MaximumPriority: 3, MaximumIdentifierBytes: 16, MaximumGeneratedIdentifierBytes: 83,
			MaximumMetadataEntries: 2, MaximumMetadataBytes: 8,
			Overload: policy.OverloadPolicy{CPUThreshold: 0.9, MemoryThreshold: 0.9, MaximumObservationAge: time.Second},
			Deadline: policy.DeadlinePolicy{EstimatedServiceTime: 100 * time.Millisecond, MinimumExecutionTime: 20 * time.Millisecond, SafetyMargin: 10 * time.Millisecond},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "batch", MinPriority: 0, MaxPriority: 1, MaxQueued: 100}, {Name: "online", MinPriority: 2, MaxPriority: 3, MaxQueued: 100}},
		CellClasses: []policy.CellClassPolicy{
			{Class: "standard", MemoryBytes: 16, Parallelism: 2, Threading: []string{"single", "multi"}, Features: []string{"simd"}},
			{Class: "tiny", MemoryBytes: 4, Parallelism: 1, Threading: []string{"single"}},
		},
		TrustClasses: []policy.TrustClassPolicy{{Name: "standard", CellClasses: []string{"tiny", "standard"}, Limits: roomy}},
		Tenants: []policy.TenantPolicy{{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}},
			TrustClasses: []string{"standard"}, CellClasses: []string{"tiny", "standard"}, MaximumPriority: 2, MaximumPayloadBytes: 5, Limits: roomy}},
	}
}

type oneRevision struct{ policy policy.RevisionPolicy }

func (s *oneRevision) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if rev.Tenant != "acme" || rev.Service != "svc" || rev.Route != "r" || rev.Contract != "c" || rev.Function != "f" ||
		rev.Revision != "rev" || rev.Release != "rel" || rev.Generation != 1 {
		return nil, false
	}
	return &s.policy, true
}

type fixture struct {
	model *Model
	load  *LoadState
	ctl   *Controller
}

func newFixture(t *testing.T, mutate func(*policy.NodeAdmissionPolicy)) *fixture {
	t.Helper()
	p := testPolicy()
	if mutate != nil {
		mutate(p)
	}
	m, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{model: m, load: &LoadState{}}
	f.ctl = m.Controller(&oneRevision{policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm",
		Threading: policy.SingleThreaded, StateModel: "stateless"}}, f.load, nil)
	if err := f.load.Publish(core.LoadSample{Sequence: 1, ObservedAt: epoch}); err != nil {
		t.Fatal(err)
	}
	return f
}

func request(id string) *core.AdmissionRequest {
	return &core.AdmissionRequest{
		ActivationID: id,
		Principal:    core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision: policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: "acme", Service: "svc", Route: "r", Contract: "c", Function: "f",
			Revision: "rev", Release: "rel", Generation: 1}},
		RequestedBudget: policy.Budget{CPUFuel: 10, MemoryBytes: 3},
	}
}

// rejection is a table row, compared field by field (the text is built
// from the same fields).
type rejectionRow struct {
	Code, Scope, Dimension, Reason string
	Retryable                      bool
}

func rejection(code, scope, dimension, reason string, retryable bool) rejectionRow {
	return rejectionRow{code, scope, dimension, reason, retryable}
}

func wantRejection(t *testing.T, err error, want rejectionRow) {
	t.Helper()
	var r *Rejection
	if !errors.As(err, &r) || (rejectionRow{r.Code, r.Scope, r.Dimension, r.Reason, r.Retryable}) != want {
		t.Fatalf("got %v, want %+v", err, want)
	}
}

func TestNewValidatesAndCopies(t *testing.T) {
	bad := testPolicy()
	bad.Node.MaximumIdentifierBytes = 0
	if _, err := New(bad); err == nil {
		t.Fatal("an invalid policy was accepted")
	}
	p := testPolicy()
	m, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	p.Tenants[0].Limits.MaxLiveActivations = 0
	p.Node.Backends[0] = "native"
	if s, _ := m.TenantSnapshot("acme"); s.Limits != roomy {
		t.Fatal("changing the input changed the model")
	}
}

func TestAdmitGrantsAndSelects(t *testing.T) {
	f := newFixture(t, nil)
	req := request("a")
	req.Priority = 2
	req.RequestedBudget.WallTime = policy.Some(500 * time.Millisecond)
	p, err := f.ctl.AdmitAt(req, at(0))
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Grant().Budget; b.CPUFuel != 10 || b.MemoryBytes != 3 || b.WallTime != policy.Some(500*time.Millisecond) {
		t.Fatalf("budget %+v", b)
	}
	o := p.Grant().Obligations
	if o.CellClass != policy.Tiny || o.QueueClass != "online" || o.TrustClass != "standard" || o.Priority != 2 {
		t.Fatalf("obligations %+v", o)
	}
	if !p.Grant().Deadline.Equal(at(500)) {
		t.Fatalf("deadline %v", p.Grant().Deadline)
	}
	if s := f.model.NodeSnapshot(); s.Live != 1 || s.Queued != 1 || s.CPUFuel != 10 || s.MemoryBytes != 3 {
		t.Fatalf("node %+v", s)
	}
	if q, max, _ := f.model.QueueClassSnapshot("online"); q != 1 || max != 100 {
		t.Fatalf("queue %d/%d", q, max)
	}
	if live, ok := f.model.CellClassSnapshot(policy.Tiny); live != 1 || !ok {
		t.Fatalf("cell %d %v", live, ok)
	}
	if _, ok := f.model.CellClassSnapshot(policy.Large); ok {
		t.Fatal("an unconfigured cell class has a snapshot")
	}
	if !p.Release() || f.model.LiveReservations() != 0 {
		t.Fatal("release")
	}
}

func TestDecisionOrder(t *testing.T) {
	cases := []struct {
		name string
		req  func(r *core.AdmissionRequest)
		want rejectionRow
	}{
		{"metadata entries come first", func(r *core.AdmissionRequest) {
			r.ActivationID = ""
			r.Attributes = map[string]string{"a": "", "b": "", "c": ""}
		}, rejection("invalid-argument", "request", "metadata-entries", "metadata-too-large", false)},
		{"metadata bytes count every map", func(r *core.AdmissionRequest) {
			r.Attributes = map[string]string{"abc": "de"}
			r.Principal.Claims = map[string]string{"fgh": "i"}
		}, rejection("invalid-argument", "request", "metadata-bytes", "metadata-too-large", false)},
		{"activation ID with a unicode space", func(r *core.AdmissionRequest) { r.ActivationID = "a\u2003b" },
			rejection("invalid-argument", "request", "activation-id", "identifier-invalid", false)},
		{"activation ID not UTF-8", func(r *core.AdmissionRequest) { r.ActivationID = "a\xff" },
			rejection("invalid-argument", "request", "activation-id", "identifier-invalid", false)},
		{"empty service is allowed, an invalid one is not", func(r *core.AdmissionRequest) { r.Principal.Service = "s\x00" },
			rejection("invalid-argument", "principal", "service", "identifier-invalid", false)},
		{"release ID over the generated bound", func(r *core.AdmissionRequest) { r.Revision.Release = string(make([]byte, 84)) },
			rejection("invalid-argument", "revision", "release-id", "identifier-invalid", false)},
		{"later-phase budget", func(r *core.AdmissionRequest) { r.RequestedBudget.StorageBytes = 1 },
			rejection("invalid-argument", "request", "storage-bytes", "budget-dimension-unsupported", false)},
		{"service principal without a service", func(r *core.AdmissionRequest) { r.Principal.Kind = policy.ServicePrincipal },
			rejection("permission-denied", "principal", "identity", "principal-not-authorized", false)},
		{"node priority before tenant priority", func(r *core.AdmissionRequest) { r.Priority = 4 },
			rejection("permission-denied", "node", "priority", "priority-not-authorized", false)},
		{"tenant priority", func(r *core.AdmissionRequest) { r.Priority = 3 },
			rejection("permission-denied", "tenant", "priority", "priority-not-authorized", false)},
		{"forged generation", func(r *core.AdmissionRequest) { r.Revision.Generation = 2 },
			rejection("admission-rejected", "revision", "revision", "revision-not-available", false)},
		{"zero memory", func(r *core.AdmissionRequest) { r.RequestedBudget.MemoryBytes = 0 },
			rejection("admission-rejected", "request", "memory-bytes", "budget-infeasible", false)},
		{"negative wall time grants nothing", func(r *core.AdmissionRequest) { r.RequestedBudget.WallTime = policy.Some(-time.Second) },
			rejection("admission-rejected", "request", "wall-time", "budget-infeasible", false)},
		{"no class has the memory", func(r *core.AdmissionRequest) { r.RequestedBudget.MemoryBytes = 17 },
			rejection("admission-rejected", "cell-class", "memory-bytes", "no-compatible-cell", false)},
		{"tenant payload at the bound is fine, over it is not", func(r *core.AdmissionRequest) { r.PayloadBytes = 6 },
			rejection("resource-exhausted", "tenant", "payload-bytes", "payload-too-large", false)},
		{"node payload", func(r *core.AdmissionRequest) { r.PayloadBytes = 11 },
			rejection("resource-exhausted", "node", "payload-bytes", "payload-too-large", false)},
		{"deadline at now", func(r *core.AdmissionRequest) { r.Deadline = policy.Some(at(0).UnixMilli()) },
			rejection("deadline-exceeded", "request", "deadline", "deadline-exceeded", false)},
		{"remaining equal to required is infeasible", func(r *core.AdmissionRequest) { r.RequestedBudget.WallTime = policy.Some(30 * time.Millisecond) },
			rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", false)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			req := request("a")
			tc.req(req)
			p, err := f.ctl.AdmitAt(req, at(0))
			if p != nil {
				t.Fatal("a rejection returned a permit")
			}
			wantRejection(t, err, tc.want)
			if f.model.NodeSnapshot().Live != 0 {
				t.Fatal("a rejection moved the ledger")
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	t.Run("the limit is reached exactly, then retryable", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.TrustClasses[0].Limits.MaxReservedCPUFuel = 20 })
		for _, id := range []string{"a", "b"} {
			if _, err := f.ctl.AdmitAt(request(id), at(0)); err != nil {
				t.Fatal(err)
			}
		}
		_, err := f.ctl.AdmitAt(request("c"), at(0))
		wantRejection(t, err, rejection("resource-exhausted", "trust-class", "cpu-fuel", "capacity-exhausted", true))
	})
	t.Run("more than the whole limit is permanent", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Tenants[0].Limits.MaxReservedMemoryBytes = 2 })
		_, err := f.ctl.AdmitAt(request("a"), at(0))
		wantRejection(t, err, rejection("resource-exhausted", "tenant", "memory-bytes", "capacity-exhausted", false))
	})
	t.Run("node before tenant, live before queued", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
			p.Node.Limits.MaxQueuedReservations = 1
			p.Tenants[0].Limits.MaxLiveActivations = 1
		})
		if _, err := f.ctl.AdmitAt(request("a"), at(0)); err != nil {
			t.Fatal(err)
		}
		_, err := f.ctl.AdmitAt(request("b"), at(0))
		wantRejection(t, err, rejection("resource-exhausted", "node", "queued-reservations", "capacity-exhausted", true))
	})
	t.Run("queue class after the scopes; starting frees its slot", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.QueueClasses[0].MaxQueued = 1 })
		p, err := f.ctl.AdmitAt(request("a"), at(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ctl.AdmitAt(request("b"), at(0))
		wantRejection(t, err, rejection("resource-exhausted", "queue-class", "queued-reservations", "capacity-exhausted", true))
		if _, err := p.StartExecutionAt(at(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ctl.AdmitAt(request("b"), at(1)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("duplicate before capacity, per tenant", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Limits.MaxLiveActivations = 1 })
		if _, err := f.ctl.AdmitAt(request("a"), at(0)); err != nil {
			t.Fatal(err)
		}
		_, err := f.ctl.AdmitAt(request("a"), at(0))
		wantRejection(t, err, rejection("already-exists", "request", "activation-id", "activation-id-unavailable", false))
	})
}

func TestFeasibility(t *testing.T) {
	t.Run("backlog counts executing reservations", func(t *testing.T) {
		f := newFixture(t, nil)
		p, err := f.ctl.AdmitAt(request("a"), at(0)) // tiny, parallelism 1
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.StartExecutionAt(at(0)); err != nil {
			t.Fatal(err)
		}
		req := request("b")
		req.RequestedBudget.WallTime = policy.Some(130 * time.Millisecond) // required = 100 + 20 + 10
		_, err = f.ctl.AdmitAt(req, at(0))
		wantRejection(t, err, rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", true))
		req.RequestedBudget.WallTime = policy.Some(130*time.Millisecond + 1)
		if _, err := f.ctl.AdmitAt(req, at(0)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("observed delay of the class", func(t *testing.T) {
		f := newFixture(t, nil)
		s := core.LoadSample{Sequence: 2, ObservedAt: epoch}
		s.QueueDelay[policy.Tiny] = 200 * time.Millisecond
		if err := f.load.Publish(s); err != nil {
			t.Fatal(err)
		}
		req := request("a")
		req.RequestedBudget.WallTime = policy.Some(230 * time.Millisecond)
		_, err := f.ctl.AdmitAt(req, at(0))
		wantRejection(t, err, rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", true))
	})
	t.Run("no wait could make room for remaining time at minimum execution plus safety margin", func(t *testing.T) {
		f := newFixture(t, nil)
		s := core.LoadSample{Sequence: 2, ObservedAt: epoch}
		s.QueueDelay[policy.Tiny] = 10 * time.Millisecond
		if err := f.load.Publish(s); err != nil {
			t.Fatal(err)
		}
		req := request("a")
		req.RequestedBudget.WallTime = policy.Some(30 * time.Millisecond) // minimum 20 + margin 10
		_, err := f.ctl.AdmitAt(req, at(0))
		wantRejection(t, err, rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", false))
		req.RequestedBudget.WallTime = policy.Some(30*time.Millisecond + 1)
		_, err = f.ctl.AdmitAt(req, at(0))
		wantRejection(t, err, rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", true))
	})
	t.Run("overflow rejects, not retryable", func(t *testing.T) {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Deadline.EstimatedServiceTime = math.MaxInt64 })
		if _, err := f.ctl.AdmitAt(request("a"), at(0)); err != nil {
			t.Fatal(err)
		}
		_, err := f.ctl.AdmitAt(request("b"), at(0))
		wantRejection(t, err, rejection("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", false))
	})
}

func TestPermits(t *testing.T) {
	t.Run("start returns only the queued slots; release is exactly once per state", func(t *testing.T) {
		f := newFixture(t, nil)
		p, _ := f.ctl.AdmitAt(request("a"), at(0))
		if err := p.EnsureSchedulableAt(at(999)); err != nil {
			t.Fatal(err)
		}
		e, err := p.StartExecutionAt(at(1))
		if err != nil || !e.IsExecution() {
			t.Fatal(err)
		}
		if s := f.model.NodeSnapshot(); s.Live != 1 || s.Queued != 0 {
			t.Fatalf("after start %+v", s)
		}
		wantRejection(t, p.EnsureSchedulableAt(at(1)), rejection("failed-precondition", "permit", "permit", "permit-not-live", false))
		if _, err := e.StartExecutionAt(at(1)); err == nil {
			t.Fatal("an execution handle started")
		}
		if p.Release() {
			t.Fatal("a consumed admission handle released")
		}
		if !e.Release() || e.Release() {
			t.Fatal("execution release is not exactly once")
		}
		if s := f.model.NodeSnapshot(); s != (core.QuotaSnapshot{Limits: roomy}) {
			t.Fatalf("not back to zero: %+v", s)
		}
	})
	t.Run("start at the deadline releases", func(t *testing.T) {
		f := newFixture(t, nil)
		p, _ := f.ctl.AdmitAt(request("a"), at(0))
		wantRejection(t, p.EnsureSchedulableAt(at(1000)), rejection("deadline-exceeded", "permit", "deadline", "deadline-exceeded", false))
		_, err := p.StartExecutionAt(at(1000))
		wantRejection(t, err, rejection("deadline-exceeded", "permit", "deadline", "deadline-exceeded", false))
		if f.model.LiveReservations() != 0 || p.Release() {
			t.Fatal("a failed start kept the reservation")
		}
	})
	t.Run("a stale handle frees nothing", func(t *testing.T) {
		f := newFixture(t, nil)
		old, _ := f.ctl.AdmitAt(request("a"), at(0))
		old.Release()
		fresh, err := f.ctl.AdmitAt(request("a"), at(0))
		if err != nil {
			t.Fatal(err)
		}
		if old.Release() || !fresh.Live() {
			t.Fatal("a stale handle released the new reservation")
		}
	})
	t.Run("the zero handle is inert", func(t *testing.T) {
		var p Permit
		if p.Release() || p.Live() || p.EnsureSchedulableAt(epoch) == nil || p.Grant().ActivationID != "" {
			t.Fatal("zero permit acts")
		}
		if _, err := p.StartExecutionAt(epoch); err == nil {
			t.Fatal("zero permit started")
		}
		var nilPermit *Permit
		if nilPermit.Release() {
			t.Fatal("nil permit released")
		}
	})
}

func TestLoad(t *testing.T) {
	unavailable := rejection("unavailable", "load", "load-sample", "load-unavailable", true)
	rejected := rejection("invalid-argument", "load", "load-sample", "load-sample-rejected", false)
	f := newFixture(t, nil)
	wantRejection(t, f.load.Publish(core.LoadSample{Sequence: 2, ObservedAt: epoch, CPUPressure: math.NaN()}), rejected)
	_, err := f.ctl.AdmitAt(request("a"), at(0))
	wantRejection(t, err, unavailable)
	if err := f.load.Publish(core.LoadSample{Sequence: 2, ObservedAt: at(10)}); err != nil {
		t.Fatal(err)
	}
	wantRejection(t, f.load.Publish(core.LoadSample{Sequence: 3, ObservedAt: at(9)}), rejected)
	if err := f.load.Publish(core.LoadSample{Sequence: 3, ObservedAt: at(10), MemoryPressure: 0.9}); err != nil {
		t.Fatal(err)
	}
	_, err = f.ctl.AdmitAt(request("a"), at(10))
	wantRejection(t, err, rejection("resource-exhausted", "node", "memory-pressure", "node-overloaded", true))
	if err := f.load.Publish(core.LoadSample{Sequence: 4, ObservedAt: at(10)}); err != nil {
		t.Fatal(err)
	}
	_, err = f.ctl.AdmitAt(request("a"), at(9))
	wantRejection(t, err, unavailable) // future-dated
	_, err = f.ctl.AdmitAt(request("a"), at(1011))
	wantRejection(t, err, unavailable) // stale
	if _, err := f.ctl.AdmitAt(request("a"), at(1010)); err != nil {
		t.Fatal(err) // exactly the maximum age
	}
	f.load.Clear()
	_, err = f.ctl.AdmitAt(request("b"), at(10))
	wantRejection(t, err, unavailable)
}

// backwardsClock goes back in time after its first reading.
type backwardsClock struct {
	mu    sync.Mutex
	reads int
}

func (c *backwardsClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return at(int64(-c.reads * 1000))
}

func TestAdmitNeverMovesTimeBackwards(t *testing.T) {
	f := newFixture(t, nil)
	load := &LoadState{}
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: at(-1000)}); err != nil {
		t.Fatal(err)
	}
	// The first reading is at -1s, where the sample is fresh; the second
	// would be at -2s, before the observation, if it were believed.
	ctl := f.model.Controller(f.ctl.source, load, &backwardsClock{})
	p, err := ctl.Admit(request("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Grant().Deadline.Equal(at(0)) {
		t.Fatalf("deadline %v, want bound from the first reading", p.Grant().Deadline)
	}
}

func TestRejectionText(t *testing.T) {
	r := capacityExhausted("tenant", "queued-reservations", true)
	want := "admission.limit: resource-exhausted scope=tenant dimension=queued-reservations reason=capacity-exhausted retryable=true"
	if r.Error() != want {
		t.Fatalf("got %q", r.Error())
	}
	first, second := capacityExhausted("node", "cpu-fuel", true), capacityExhausted("node", "cpu-fuel", true)
	if first == second {
		t.Fatal("rejections are shared; the model builds a fresh one each time")
	}
}

func TestWithPolicySourceSharesTheLedger(t *testing.T) {
	f := newFixture(t, nil)
	none := f.ctl.WithPolicySource(nil)
	_, err := none.AdmitAt(request("a"), at(0))
	wantRejection(t, err, rejection("admission-rejected", "revision", "revision", "revision-not-available", false))
	if _, err := f.ctl.AdmitAt(request("a"), at(0)); err != nil {
		t.Fatal(err)
	}
	if none.Model() != f.model || none.Model().LiveReservations() != 1 {
		t.Fatal("controllers do not share the ledger")
	}
}

// steppingClock reads first once, then later.
type steppingClock struct {
	mu           sync.Mutex
	first, later time.Time
	read         bool
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read {
		return c.later
	}
	c.read = true
	return c.first
}

func TestSamplePublishedAfterTheFirstReadingIsNotFutureDated(t *testing.T) {
	f := newFixture(t, nil)
	load := &LoadState{}
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: at(5)}); err != nil {
		t.Fatal(err)
	}
	_, err := f.model.Controller(f.ctl.source, load, nil).AdmitAt(request("a"), at(0))
	wantRejection(t, err, rejection("unavailable", "load", "load-sample", "load-unavailable", true))
	p, err := f.model.Controller(f.ctl.source, load, &steppingClock{first: at(0), later: at(10)}).Admit(request("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Grant().Deadline.Equal(at(1000)) {
		t.Fatalf("deadline %v, want bound to the first reading", p.Grant().Deadline)
	}
}
