package core

import (
	"runtime"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

func admit(t *testing.T, f *fixture, id string, atMs int64) *AdmissionPermit {
	t.Helper()
	p, err := f.ctl.AdmitAt(request(id), at(atMs))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPermitCarriesTheGrant(t *testing.T) {
	f := newFixture(t, nil)
	req := request("grant")
	req.Revision.Attributes = map[string]string{"forged": "yes"}
	p, err := f.ctl.AdmitAt(req, at(7))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if p.Grant().ActivationID != "grant" || p.Grant().Revision.Tenant != "acme" {
		t.Fatalf("identity: %q %q", p.Grant().ActivationID, p.Grant().Revision.Tenant)
	}
	want := policy.RevisionIdentity{Tenant: "acme", Service: "thumbs", Route: "resize", Contract: "img.v1", Function: "resize",
		Revision: "rev-resize", Release: "rel-resize", Generation: 1}
	if p.Grant().Revision != want {
		t.Fatalf("revision %+v", p.Grant().Revision)
	}
	b := p.Grant().Budget
	if b.CPUFuel != grantFuel || b.MemoryBytes != grantMemory || b.WallTime != policy.Some(5*time.Second) {
		t.Fatalf("budget %+v", b)
	}
	if !p.Grant().Deadline.Equal(at(5007)) {
		t.Fatalf("deadline %v", p.Grant().Deadline)
	}
	o := p.Grant().Obligations
	if o.CellClass != policy.Small || o.QueueClass != "batch" || o.TrustClass != "standard" || o.Priority != 3 ||
		o.Backend != "wasm" || o.Threading != policy.SingleThreaded || o.StateModel != "stateless" ||
		o.Features.Len() != 1 || o.Features.At(0) != "simd" || !o.Features.Contains("simd") || o.Features.Contains("threads") ||
		o.CallDepthLimit != 4 {
		t.Fatalf("obligations %+v", o)
	}
	names := o.Features.Names()
	names[0] = "mutated"
	if p.Grant().Obligations.Features.At(0) != "simd" {
		t.Fatal("obligations are mutable through the accessor")
	}
	if n := testing.AllocsPerRun(10, func() { _ = p.Grant() }); n != 0 {
		t.Fatalf("Grant allocates %v objects", n)
	}
}

func TestGrantIsTheMinimumOfEveryLayer(t *testing.T) {
	cases := []struct {
		name                string
		request             policy.Budget
		capsule, deployment policy.Ceiling
		fuel, memory        uint64
		wall                time.Duration
	}{
		{"request is smallest", policy.Budget{CPUFuel: 5, MemoryBytes: 6, WallTime: policy.Some(time.Second)},
			policy.Ceiling{}, policy.Ceiling{}, 5, 6, time.Second},
		{"omitted wall time adds no limit: node ceiling", policy.Budget{CPUFuel: 5, MemoryBytes: 6},
			policy.Ceiling{}, policy.Ceiling{}, 5, 6, 30 * time.Second},
		{"capsule is smallest", policy.Budget{CPUFuel: 50, MemoryBytes: 60},
			policy.Ceiling{CPUFuel: policy.Some[uint64](5), MemoryBytes: policy.Some[uint64](6), WallTime: policy.Some(time.Second)},
			policy.Ceiling{CPUFuel: policy.Some[uint64](7)}, 5, 6, time.Second},
		{"deployment is smallest", policy.Budget{CPUFuel: 50, MemoryBytes: 60, WallTime: policy.Some(time.Hour)},
			policy.Ceiling{CPUFuel: policy.Some[uint64](9)},
			policy.Ceiling{CPUFuel: policy.Some[uint64](5), MemoryBytes: policy.Some[uint64](6), WallTime: policy.Some(2 * time.Second)}, 5, 6, 2 * time.Second},
		{"node ceiling bounds everything", policy.Budget{CPUFuel: 1 << 62, MemoryBytes: 1 << 62, WallTime: policy.Some(time.Hour)},
			policy.Ceiling{}, policy.Ceiling{}, 5_000_000_000, 1 << 30, 30 * time.Second},
	}
	node := basePolicy(t).Node.BudgetCeiling
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rev := &policy.RevisionPolicy{CapsuleCeiling: tc.capsule, DeploymentCeiling: tc.deployment}
			g := policy.Budget{NetworkEgressBytes: 7, StorageBytes: 7, OutboundCalls: 7} // overwritten whole
			grantInto(&g, &tc.request, rev, &node)
			if g.CPUFuel != tc.fuel || g.MemoryBytes != tc.memory || g.WallTime != policy.Some(tc.wall) {
				t.Fatalf("got %+v", g)
			}
		})
	}
}

func TestStartExecution(t *testing.T) {
	t.Run("returns only the queued slots", func(t *testing.T) {
		f := newFixture(t, nil)
		p := admit(t, f, "s", 0)
		if err := p.EnsureSchedulableAt(at(10)); err != nil {
			t.Fatal(err)
		}
		e, err := p.StartExecutionAt(at(10))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := f.provider.TenantSnapshot("acme")
		if s.Live != 1 || s.Queued != 0 || s.CPUFuel != grantFuel || s.MemoryBytes != grantMemory {
			t.Fatalf("after start %+v", s)
		}
		if q, _, _ := f.provider.QueueClassSnapshot("batch"); q != 0 {
			t.Fatalf("queue class still holds %d", q)
		}
		if live, _ := f.provider.CellClassSnapshot(policy.Small); live != 1 {
			t.Fatalf("cell backlog %d", live)
		}
		if e.Grant().ActivationID != "s" || e.Grant().Obligations.CellClass != policy.Small || !e.Grant().Deadline.Equal(p.Grant().Deadline) {
			t.Fatal("execution permit does not carry the grant")
		}
		if !e.Release() {
			t.Fatal("release returned nothing")
		}
		f.isZero(t)
	})
	t.Run("at the deadline fails and releases the permit", func(t *testing.T) {
		f := newFixture(t, nil)
		p := admit(t, f, "late", 0)
		_, err := p.StartExecutionAt(at(5000))
		wantError(t, err, CodeDeadlineExceeded, ScopePermit, DimDeadline, ReasonDeadlineExceeded, false)
		f.isZero(t)
		if p.Release() {
			t.Fatal("a failed start left something to release")
		}
	})
	t.Run("just before the deadline succeeds", func(t *testing.T) {
		f := newFixture(t, nil)
		p := admit(t, f, "edge", 0)
		e, err := p.StartExecutionAt(at(5000).Add(-time.Nanosecond))
		if err != nil {
			t.Fatal(err)
		}
		e.Release()
	})
	t.Run("live start resamples the clock", func(t *testing.T) {
		f := newFixture(t, nil)
		p := admit(t, f, "clock", 0)
		f.clock.set(at(6000))
		_, err := p.StartExecution()
		wantError(t, err, CodeDeadlineExceeded, ScopePermit, DimDeadline, ReasonDeadlineExceeded, false)
		f.isZero(t)
	})
	t.Run("a consumed permit is not live", func(t *testing.T) {
		f := newFixture(t, nil)
		p := admit(t, f, "twice", 0)
		e, err := p.StartExecutionAt(at(1))
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.StartExecutionAt(at(1))
		wantError(t, err, CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
		wantError(t, p.EnsureSchedulableAt(at(1)), CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
		if p.Release() {
			t.Fatal("releasing a consumed admission permit returned the execution's reservation")
		}
		if s := f.provider.NodeSnapshot(); s.Live != 1 {
			t.Fatalf("execution reservation lost: %+v", s)
		}
		if !e.Release() || e.Release() {
			t.Fatal("execution release is not exactly-once")
		}
		f.isZero(t)
	})
}

func TestEnsureSchedulableAt(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "sched", 0)
	if err := p.EnsureSchedulableAt(at(4999)); err != nil {
		t.Fatal(err)
	}
	err := p.EnsureSchedulableAt(at(5000))
	wantError(t, err, CodeDeadlineExceeded, ScopePermit, DimDeadline, ReasonDeadlineExceeded, false)
	if !p.Live() {
		t.Fatal("EnsureSchedulableAt changed the permit")
	}
	p.Release()
	wantError(t, p.EnsureSchedulableAt(at(1)), CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
}

func TestReleaseIsIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "rel", 0)
	if !p.Release() {
		t.Fatal("first release returned nothing")
	}
	if p.Release() {
		t.Fatal("second release returned something")
	}
	f.isZero(t)
	_, err := p.StartExecutionAt(at(1))
	wantError(t, err, CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
}

func TestStaleReleaseCannotFreeAnotherReservation(t *testing.T) {
	f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Limits.MaxLiveActivations = 1 })
	old := admit(t, f, "same", 0)
	ticket := old.state().ticket
	old.Release()
	fresh := admit(t, f, "same", 0) // reuses the only entry
	if fresh.state().ticket == ticket {
		t.Fatalf("a reused entry kept its generation: %+v", ticket)
	}
	if ledgerRelease(f.provider, ticket) {
		t.Fatal("a stale ticket released the new reservation")
	}
	if old.Release() {
		t.Fatal("a released permit released again")
	}
	if s := f.provider.NodeSnapshot(); s.Live != 1 {
		t.Fatalf("the new reservation was freed: %+v", s)
	}
	fresh.Release()
	f.isZero(t)
}

func TestZeroValuePermitsAreInert(t *testing.T) {
	var p AdmissionPermit
	wantError(t, p.EnsureSchedulableAt(epoch), CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
	_, err := p.StartExecution()
	wantError(t, err, CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
	_, err = p.StartExecutionAt(epoch)
	wantError(t, err, CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
	if p.Release() || p.Live() || p.Grant().ActivationID != "" {
		t.Fatal("zero admission permit is not inert")
	}
	var e ExecutionPermit
	if e.Release() || e.Live() || e.Grant().ActivationID != "" {
		t.Fatal("zero execution permit is not inert")
	}
	var nilPermit *AdmissionPermit
	if nilPermit.Release() {
		t.Fatal("nil permit released something")
	}
}

// waitForLeak runs the collector until cond holds or a deadline passes.
func waitForLeak(t *testing.T, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a loaded machine collects slowly
	for time.Now().Before(deadline) {
		runtime.GC()
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

func TestLeakedPermitsAreReclaimedAndCounted(t *testing.T) {
	f := newFixture(t, nil)
	func() {
		for i := 0; i < 3; i++ {
			admit(t, f, "leak-"+string(rune('a'+i)), 0)
		}
		e, err := admit(t, f, "leak-exec", 0).StartExecutionAt(at(1))
		if err != nil || e == nil {
			t.Fatal(err)
		}
	}()
	if !waitForLeak(t, func() bool { return f.provider.Metrics().Leaked == 4 }) {
		t.Fatalf("leaked = %d, want 4", f.provider.Metrics().Leaked)
	}
	f.isZero(t)
}

func TestRetainedExecutionPermitIsNeverReclaimedEarly(t *testing.T) {
	f := newFixture(t, nil)
	var e *ExecutionPermit
	func() {
		p := admit(t, f, "running", 0)
		var err error
		if e, err = p.StartExecutionAt(at(1)); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if f.provider.Metrics().Leaked != 0 || f.provider.NodeSnapshot().Live != 1 || !e.Live() {
		t.Fatal("a retained execution permit was reclaimed")
	}
	if !e.Release() {
		t.Fatal("release returned nothing")
	}
	runtime.GC()
	if f.provider.Metrics().Leaked != 0 {
		t.Fatal("a released permit was counted as leaked")
	}
	f.isZero(t)
}

func TestMetricsCountAdmissionsAndRejections(t *testing.T) {
	f := newFixture(t, nil)
	p := admit(t, f, "m1", 0)
	_, _ = f.ctl.AdmitAt(request("m1"), at(0))
	req := request("m2")
	req.Priority = 99
	_, _ = f.ctl.AdmitAt(req, at(0))
	m := f.provider.Metrics()
	if by := m.RejectedByReason(); m.Admitted != 1 || by[ReasonActivationIDUnavailable] != 1 || by[ReasonPriorityNotAuthorized] != 1 || len(by) != 2 {
		t.Fatalf("metrics %+v", m)
	}
	if len(m.Rejected) != len(AllErrors()) {
		t.Fatalf("%d rejection counters, want one per error (%d)", len(m.Rejected), len(AllErrors()))
	}
	for i, r := range m.Rejected {
		want := int64(0)
		if r.Err == errDuplicate.err() || r.Err == errNodePriority.err() {
			want = 1
		}
		if r.Err != AllErrors()[i] || r.Count != want {
			t.Fatalf("counter %d: %v %d, want %v %d", i, r.Err, r.Count, AllErrors()[i], want)
		}
	}
	p.Release()
}

func TestNilRequestIsMisuse(t *testing.T) {
	f := newFixture(t, nil)
	for name, call := range map[string]func(){
		"Admit": func() { _, _ = f.ctl.Admit(nil) },
	} {
		func() {
			defer func() {
				if r := recover(); r != "core: "+name+" with a nil request" {
					t.Errorf("%s: recovered %v", name, r)
				}
			}()
			call()
		}()
	}
}
