package core

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// epoch is the fixed virtual time tests admit at.
var epoch = time.UnixMilli(1767225600000)

func at(ms int64) time.Time { return epoch.Add(time.Duration(ms) * time.Millisecond) }

// basePolicy decodes the example node policy fresh for each caller.
func basePolicy(t testing.TB) *policy.NodeAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mapSource is a small in-memory RecordSource: each entry is a full
// identity tuple, its policy and its requirements slot. handle hands out
// a RevisionHandle to an entry, as a route resolver would.
type mapSource struct {
	entries []*sourceEntry
	looked  atomic.Int64 // lookups by identity (RevisionPolicy, RevisionRecord)
}

type sourceEntry struct {
	rev          policy.ResolvedRevision
	policy       *policy.RevisionPolicy
	requirements policy.RecordSlot
}

// mapHandle is a mapSource's handle: the source and the entry.
type mapHandle struct {
	source *mapSource
	entry  *sourceEntry
}

func (h *mapHandle) RevisionIdentity() policy.RevisionIdentity { return h.entry.rev.RevisionIdentity }

func (s *mapSource) add(rev policy.ResolvedRevision, p *policy.RevisionPolicy) {
	rev.Attributes = nil
	s.entries = append(s.entries, &sourceEntry{rev: rev, policy: p})
}

// handle is a handle to the entry whose identity is rev's; nil if none.
func (s *mapSource) handle(rev policy.RevisionIdentity) *mapHandle {
	if e := s.find(&policy.ResolvedRevision{RevisionIdentity: rev}); e != nil {
		return &mapHandle{s, e}
	}
	return nil
}

func (s *mapSource) find(rev *policy.ResolvedRevision) *sourceEntry {
	s.looked.Add(1)
	for _, e := range s.entries {
		if e.rev.RevisionIdentity == rev.RevisionIdentity {
			return e
		}
	}
	return nil
}

func (s *mapSource) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	if e := s.find(rev); e != nil {
		return e.policy, true
	}
	return nil, false
}

func (s *mapSource) RevisionRecord(_ any, rev *policy.ResolvedRevision) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	if e := s.find(rev); e != nil {
		return &e.rev.RevisionIdentity, e.policy, &e.requirements, true
	}
	return nil, nil, nil, false
}

func (s *mapSource) OwnRecord(h any) (*policy.RevisionIdentity, *policy.RevisionPolicy, *policy.RecordSlot, bool) {
	if own, ok := h.(*mapHandle); ok && own != nil && own.source == s {
		return &own.entry.rev.RevisionIdentity, own.entry.policy, &own.entry.requirements, true
	}
	return nil, nil, nil, false
}

var _ RecordSource = (*mapSource)(nil)

// plainSource is a mapSource seen only as a RevisionPolicySource.
type plainSource struct{ s *mapSource }

func (p plainSource) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	return p.s.RevisionPolicy(rev)
}

// resizeRevision is acme/thumbs/resize, as the shared scenarios deploy it.
func resizeRevision() policy.ResolvedRevision {
	return policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: "acme", Service: "thumbs", Route: "resize", Contract: "img.v1",
		Function: "resize", Revision: "rev-resize", Release: "rel-resize", Generation: 1}}
}

func resizePolicy() *policy.RevisionPolicy {
	return &policy.RevisionPolicy{
		TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
		Features: []string{"simd"}, CallDepthLimit: 4,
		CapsuleCeiling:    policy.Ceiling{CPUFuel: policy.Some[uint64](2_000_000_000), MemoryBytes: policy.Some[uint64](64 << 20)},
		DeploymentCeiling: policy.Ceiling{CPUFuel: policy.Some[uint64](1_000_000_000), MemoryBytes: policy.Some[uint64](32 << 20), WallTime: policy.Some(5 * time.Second)},
		Placement:         policy.PlacementRestriction{Architectures: []string{"x86_64"}},
	}
}

type fixture struct {
	provider *LocalQuotaProvider
	load     *NodeLoadState
	source   *mapSource
	ctl      *AdmissionController
	clock    *fakeClock
}

// fakeClock is a settable clock; Since is measured against it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// newFixture builds a provider from the example policy (after mutate),
// a source holding acme's resize revision, and a fresh load sample at
// the epoch.
func newFixture(t testing.TB, mutate func(*policy.NodeAdmissionPolicy)) *fixture {
	t.Helper()
	p := basePolicy(t)
	if mutate != nil {
		mutate(p)
	}
	provider, err := NewLocalQuotaProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: epoch}
	f := &fixture{provider: provider, load: NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, clock),
		source: &mapSource{}, clock: clock}
	f.source.add(resizeRevision(), resizePolicy())
	f.ctl = provider.Controller(ControllerConfig{Source: f.source, Load: f.load, Clock: f.clock})
	f.publish(t, 1, 0, 0.5, 0.5)
	return f
}

func (f *fixture) publish(t testing.TB, seq uint64, atMs int64, cpu, mem float64) {
	t.Helper()
	if err := f.load.Publish(LoadSample{Sequence: seq, ObservedAt: at(atMs), CPUPressure: cpu, MemoryPressure: mem}); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// request is a valid request for acme's resize revision.
func request(id string) *AdmissionRequest {
	return &AdmissionRequest{
		ActivationID: id,
		Principal:    Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision:     resizeRevision(),
		RequestedBudget: policy.Budget{
			CPUFuel: 3_000_000_000, MemoryBytes: 100 << 20,
		},
		PayloadBytes: 1000,
		Priority:     3,
	}
}

// isZero reports whether every ledger counter of every scope is zero.
func (f *fixture) isZero(t testing.TB) {
	t.Helper()
	pr := f.provider
	check := func(name string, s QuotaSnapshot) {
		if s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			t.Errorf("%s not back to zero: %+v", name, s)
		}
	}
	check("node", pr.NodeSnapshot())
	c := pr.Policy()
	for i := 0; i < c.NumTenants(); i++ {
		s, _ := pr.TenantSnapshot(c.Tenant(policy.TenantID(i)).Name)
		check("tenant", s)
	}
	for i := 0; i < c.NumTrustClasses(); i++ {
		s, _ := pr.TrustClassSnapshot(c.TrustClass(policy.TrustClassID(i)).Name)
		check("trust", s)
	}
	for i := 0; i < c.NumQueueClasses(); i++ {
		q, _, _ := pr.QueueClassSnapshot(c.QueueClass(policy.QueueClassID(i)).Name)
		if q != 0 {
			t.Errorf("queue class %d queued %d", i, q)
		}
	}
	for cl := policy.CellClass(0); cl < policy.NumCellClasses; cl++ {
		if live, ok := pr.CellClassSnapshot(cl); ok && live != 0 {
			t.Errorf("cell class %v live %d", cl, live)
		}
	}
	if n := pr.LiveReservations(); n != 0 {
		t.Errorf("live table holds %d entries", n)
	}
}

// wantError asserts err is the table row (code, scope, dimension, reason,
// retryable).
func wantError(t testing.TB, err error, code Code, scope Scope, dim Dimension, reason Reason, retryable bool) {
	t.Helper()
	e, ok := err.(Error)
	if !ok || e == (Error{}) {
		t.Fatalf("got %v, want %s/%s/%s/%s retryable=%v", err, code, scope, dim, reason, retryable)
	}
	if e.Code() != code || e.Scope() != scope || e.Dimension() != dim || e.Reason() != reason || e.Retryable() != retryable {
		t.Fatalf("got %s, want %s/%s/%s/%s retryable=%v", e, code, scope, dim, reason, retryable)
	}
}
