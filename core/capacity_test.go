package core

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// One admission of request() reserves 1 live, 1 queued, 1e9 fuel and
// 32 MiB at node, tenant and trust class, 1 queued at queue class batch
// and 1 live at cell class small.
const (
	grantFuel   = 1_000_000_000
	grantMemory = 32 << 20
)

var roomy = policy.Limits{MaxLiveActivations: 1000, MaxQueuedReservations: 1000, MaxReservedCPUFuel: 1 << 60, MaxReservedMemoryBytes: 1 << 60}

// roomyPolicy lifts every capacity limit out of the way.
func roomyPolicy(p *policy.NodeAdmissionPolicy) {
	p.Node.Limits = roomy
	for i := range p.Tenants {
		p.Tenants[i].Limits = roomy
	}
	for i := range p.TrustClasses {
		p.TrustClasses[i].Limits = roomy
	}
	for i := range p.QueueClasses {
		p.QueueClasses[i].MaxQueued = 1000
	}
	// A large parallelism keeps feasibility out of capacity tests.
	for i := range p.CellClasses {
		p.CellClasses[i].Parallelism = 1000
	}
}

type capacityCase struct {
	scope Scope
	dim   Dimension
	// limit sets the limit under test to what n admissions need.
	limit func(p *policy.NodeAdmissionPolicy, n uint64)
}

func limitsOf(scope Scope) func(p *policy.NodeAdmissionPolicy) *policy.Limits {
	switch scope {
	case ScopeNode:
		return func(p *policy.NodeAdmissionPolicy) *policy.Limits { return &p.Node.Limits }
	case ScopeTenant:
		return func(p *policy.NodeAdmissionPolicy) *policy.Limits { return &p.Tenants[0].Limits }
	default:
		return func(p *policy.NodeAdmissionPolicy) *policy.Limits { return &p.TrustClasses[0].Limits }
	}
}

func capacityCases() []capacityCase {
	var cases []capacityCase
	for _, scope := range []Scope{ScopeNode, ScopeTenant, ScopeTrustClass} {
		lim := limitsOf(scope)
		cases = append(cases,
			capacityCase{scope, DimLiveActivations, func(p *policy.NodeAdmissionPolicy, n uint64) { lim(p).MaxLiveActivations = n }},
			capacityCase{scope, DimQueuedReservations, func(p *policy.NodeAdmissionPolicy, n uint64) { lim(p).MaxQueuedReservations = n }},
			capacityCase{scope, DimCPUFuel, func(p *policy.NodeAdmissionPolicy, n uint64) { lim(p).MaxReservedCPUFuel = n * grantFuel }},
			capacityCase{scope, DimMemoryBytes, func(p *policy.NodeAdmissionPolicy, n uint64) { lim(p).MaxReservedMemoryBytes = n * grantMemory }},
		)
	}
	cases = append(cases, capacityCase{ScopeQueueClass, DimQueuedReservations, func(p *policy.NodeAdmissionPolicy, n uint64) { p.QueueClasses[0].MaxQueued = n }})
	return cases
}

func TestCapacityEachScopeAndDimension(t *testing.T) {
	for _, tc := range capacityCases() {
		t.Run(fmt.Sprintf("%s %s: the limit is reached exactly, then retryable", tc.scope, tc.dim), func(t *testing.T) {
			f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { roomyPolicy(p); tc.limit(p, 2) })
			p1, err := f.ctl.AdmitAt(request("a1"), at(0))
			if err != nil {
				t.Fatal(err)
			}
			p2, err := f.ctl.AdmitAt(request("a2"), at(0))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.ctl.AdmitAt(request("a3"), at(0))
			wantError(t, err, CodeResourceExhausted, tc.scope, tc.dim, ReasonCapacityExhausted, true)

			// Starting returns only the queued slots.
			e1, err := p1.StartExecutionAt(at(1))
			if err != nil {
				t.Fatal(err)
			}
			p3, err := f.ctl.AdmitAt(request("a3"), at(1))
			if tc.dim == DimQueuedReservations {
				if err != nil {
					t.Fatalf("a started reservation still holds its queued slot: %v", err)
				}
				p3.Release()
			} else {
				wantError(t, err, CodeResourceExhausted, tc.scope, tc.dim, ReasonCapacityExhausted, true)
			}
			e1.Release()
			p2.Release()
			f.isZero(t)
		})
		t.Run(fmt.Sprintf("%s %s: a reservation that cannot fit an empty scope is not retryable", tc.scope, tc.dim), func(t *testing.T) {
			f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { roomyPolicy(p); tc.limit(p, 0) })
			_, err := f.ctl.AdmitAt(request("a1"), at(0))
			wantError(t, err, CodeResourceExhausted, tc.scope, tc.dim, ReasonCapacityExhausted, false)
			f.isZero(t)
		})
	}
}

func TestCapacityScopeOrder(t *testing.T) {
	// Every scope is full at once; the node answers first, then tenant,
	// trust class and queue class as each earlier one gets room.
	order := []Scope{ScopeNode, ScopeTenant, ScopeTrustClass, ScopeQueueClass}
	for skip := range order {
		f := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
			roomyPolicy(p)
			lim := []func(){
				func() { p.Node.Limits.MaxLiveActivations = 1 },
				func() { p.Tenants[0].Limits.MaxLiveActivations = 1 },
				func() { p.TrustClasses[0].Limits.MaxLiveActivations = 1 },
				func() { p.QueueClasses[0].MaxQueued = 1 },
			}
			for i := skip; i < len(lim); i++ {
				lim[i]()
			}
		})
		p1, err := f.ctl.AdmitAt(request("a1"), at(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ctl.AdmitAt(request("a2"), at(0))
		dim := DimLiveActivations
		if order[skip] == ScopeQueueClass {
			dim = DimQueuedReservations
		}
		wantError(t, err, CodeResourceExhausted, order[skip], dim, ReasonCapacityExhausted, true)
		p1.Release()
	}
}

func TestDimensionOrderWithinScope(t *testing.T) {
	f := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
		roomyPolicy(p)
		p.Tenants[0].Limits = policy.Limits{MaxLiveActivations: 1, MaxQueuedReservations: 1, MaxReservedCPUFuel: grantFuel, MaxReservedMemoryBytes: grantMemory}
	})
	p1, err := f.ctl.AdmitAt(request("a1"), at(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ctl.AdmitAt(request("a2"), at(0))
	wantError(t, err, CodeResourceExhausted, ScopeTenant, DimLiveActivations, ReasonCapacityExhausted, true)
	p1.Release()
}

func TestDuplicateActivationID(t *testing.T) {
	f := newFixture(t, roomyPolicy)
	p1, err := f.ctl.AdmitAt(request("dup"), at(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("same tenant and ID is already live", func(t *testing.T) {
		_, err := f.ctl.AdmitAt(request("dup"), at(0))
		wantError(t, err, CodeAlreadyExists, ScopeRequest, DimActivationID, ReasonActivationIDUnavailable, false)
	})
	t.Run("duplicate is answered before a full scope", func(t *testing.T) {
		g := newFixture(t, func(p *policy.NodeAdmissionPolicy) { roomyPolicy(p); p.Tenants[0].Limits.MaxLiveActivations = 1 })
		q, err := g.ctl.AdmitAt(request("dup"), at(0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.ctl.AdmitAt(request("dup"), at(0))
		wantError(t, err, CodeAlreadyExists, ScopeRequest, DimActivationID, ReasonActivationIDUnavailable, false)
		_, err = g.ctl.AdmitAt(request("other"), at(0))
		wantError(t, err, CodeResourceExhausted, ScopeTenant, DimLiveActivations, ReasonCapacityExhausted, true)
		q.Release()
	})
	t.Run("another tenant may use the same ID", func(t *testing.T) {
		rev := resizeRevision()
		rev.Tenant = "globex"
		f.source.add(rev, resizePolicy())
		req := request("dup")
		req.Principal = Principal{Kind: policy.UserPrincipal, Subject: "bob", Tenant: "globex"}
		req.Revision = rev
		p2, err := f.ctl.AdmitAt(req, at(0))
		if err != nil {
			t.Fatal(err)
		}
		p2.Release()
	})
	t.Run("the ID is free again after release", func(t *testing.T) {
		p1.Release()
		p3, err := f.ctl.AdmitAt(request("dup"), at(0))
		if err != nil {
			t.Fatal(err)
		}
		p3.Release()
	})
	f.isZero(t)
}

func TestQueueFeasibilityCountsBacklog(t *testing.T) {
	// small has parallelism 4: with 4 live, local wait is one service time.
	f := newFixture(t, func(p *policy.NodeAdmissionPolicy) {
		p.Node.Limits = roomy
		p.Tenants[0].Limits = roomy
		p.TrustClasses[0].Limits = roomy
	})
	var held []*AdmissionPermit
	for i := 0; i < 4; i++ {
		p, err := f.ctl.AdmitAt(request(fmt.Sprintf("b%d", i)), at(0))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	req := request("tight")
	req.RequestedBudget.WallTime = policy.Some(130 * time.Millisecond) // required = 100 + 20 + 10
	_, err := f.ctl.AdmitAt(req, at(0))
	wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, true)
	req.RequestedBudget.WallTime = policy.Some(131 * time.Millisecond)
	p, err := f.ctl.AdmitAt(req, at(0))
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	// Executing reservations still count as backlog.
	e, err := held[0].StartExecutionAt(at(0))
	if err != nil {
		t.Fatal(err)
	}
	req.RequestedBudget.WallTime = policy.Some(130 * time.Millisecond)
	_, err = f.ctl.AdmitAt(req, at(0))
	wantError(t, err, CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, true)
	e.Release()
	for _, p := range held[1:] {
		p.Release()
	}
	f.isZero(t)
}

// TestConcurrentLastSlots races many goroutines for the last slots of each
// scope: exactly the limit is admitted and the ledger returns to zero.
func TestConcurrentLastSlots(t *testing.T) {
	const limit, racers = 5, 64
	for _, tc := range capacityCases() {
		t.Run(fmt.Sprintf("%s %s", tc.scope, tc.dim), func(t *testing.T) {
			f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { roomyPolicy(p); tc.limit(p, limit) })
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				permits []*AdmissionPermit
				start   = make(chan struct{})
			)
			for i := 0; i < racers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					p, err := f.ctl.Admit(request(fmt.Sprintf("r%d", i)))
					if err != nil {
						wantError(t, err, CodeResourceExhausted, tc.scope, tc.dim, ReasonCapacityExhausted, true)
						return
					}
					mu.Lock()
					permits = append(permits, p)
					mu.Unlock()
				}()
			}
			close(start)
			wg.Wait()
			if len(permits) != limit {
				t.Fatalf("admitted %d, want exactly %d", len(permits), limit)
			}
			for _, p := range permits {
				wg.Add(1)
				go func() { defer wg.Done(); p.Release() }()
			}
			wg.Wait()
			f.isZero(t)
		})
	}
}
