package nodetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Subjects maps the example policy's tenants to an allowlisted user.
var Subjects = map[string]string{"acme": "alice", "globex": "bob", "initech": "carol", "umbrella": "dave"}

// PolicyFile decodes testdata/policy/node.json from the module root.
func PolicyFile(t testing.TB) *policy.NodeAdmissionPolicy {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "testdata", "policy", "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("nodetest: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Roomy raises every reservation limit and queue bound to n, so that a
// throughput test is limited by the pool and scheduler, not by admission,
// and shrinks the service estimate so a deep backlog stays feasible.
func Roomy(p *policy.NodeAdmissionPolicy, n uint64) {
	big := policy.Limits{MaxLiveActivations: n, MaxQueuedReservations: n, MaxReservedCPUFuel: 1 << 62, MaxReservedMemoryBytes: 1 << 62}
	p.Node.Limits = big
	for i := range p.Tenants {
		p.Tenants[i].Limits = big
	}
	for i := range p.TrustClasses {
		p.TrustClasses[i].Limits = big
	}
	for i := range p.QueueClasses {
		p.QueueClasses[i].MaxQueued = n
	}
	p.Node.Deadline.EstimatedServiceTime = time.Microsecond
}

// Revision is the identity of the one revision the source deploys for
// tenant.
func Revision(tenant string) policy.ResolvedRevision {
	return policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: tenant, Service: "svc", Route: "run", Contract: "c.v1",
		Function: "run", Revision: "rev-" + tenant, Release: "rel-" + tenant, Generation: 1}}
}

// RevisionPolicy is a single-threaded wasm revision without features in
// the standard trust class: it fits the tiny, small and standard classes.
func RevisionPolicy() *policy.RevisionPolicy {
	return &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded,
		StateModel: "stateless", CallDepthLimit: 4}
}

// Source is an in-memory RevisionPolicySource holding one revision per
// tenant of the example policy.
type Source struct {
	policy *policy.RevisionPolicy
}

// RevisionPolicy verifies the whole identity tuple.
func (s *Source) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	want := Revision(rev.Tenant)
	if rev.Service != want.Service || rev.Route != want.Route || rev.Contract != want.Contract || rev.Function != want.Function ||
		rev.Revision != want.Revision || rev.Release != want.Release || rev.Generation != want.Generation {
		return nil, false
	}
	if _, ok := Subjects[rev.Tenant]; !ok {
		return nil, false
	}
	return s.policy, true
}

// Node is an admission fixture on the live clock.
type Node struct {
	Provider   *core.LocalQuotaProvider
	Load       *core.NodeLoadState
	Source     *Source
	Controller *core.AdmissionController

	mu       sync.Mutex
	sequence uint64 // guarded by mu
}

// New builds a fixture from the example policy after mutate. Load samples
// are accepted for a minute, so a slow run under the race detector does
// not go stale between publishes.
func New(t testing.TB, mutate func(*policy.NodeAdmissionPolicy)) *Node {
	t.Helper()
	p := PolicyFile(t)
	p.Node.Overload.MaximumObservationAge = time.Minute
	if mutate != nil {
		mutate(p)
	}
	provider, err := core.NewLocalQuotaProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Provider: provider, Load: core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, nil),
		Source: &Source{policy: RevisionPolicy()}}
	n.Controller = provider.Controller(core.ControllerConfig{Source: n.Source, Load: n.Load})
	n.Publish(t, core.LoadSample{CPUPressure: 0.1, MemoryPressure: 0.1})
	return n
}

// Publish publishes s with the next sequence number, observed now.
func (n *Node) Publish(t testing.TB, s core.LoadSample) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sequence++
	s.Sequence = n.sequence
	s.ObservedAt = time.Now()
	if err := n.Load.Publish(s); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

// Ask describes one request; zero fields take defaults.
type Ask struct {
	Tenant   string // default acme
	ID       string // default a fresh unique ID
	Priority uint32
	Fuel     uint64        // default 1e6
	Memory   uint64        // default 1 MiB: the tiny class
	WallTime time.Duration // default: no request limit
}

var ids atomic.Uint64

// Request builds the admission request for a.
func Request(a Ask) *core.AdmissionRequest {
	if a.Tenant == "" {
		a.Tenant = "acme"
	}
	if a.ID == "" {
		a.ID = fmt.Sprintf("act-%d", ids.Add(1))
	}
	if a.Fuel == 0 {
		a.Fuel = 1_000_000
	}
	if a.Memory == 0 {
		a.Memory = 1 << 20
	}
	req := &core.AdmissionRequest{
		ActivationID:    a.ID,
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: Subjects[a.Tenant], Tenant: a.Tenant},
		Revision:        Revision(a.Tenant),
		RequestedBudget: policy.Budget{CPUFuel: a.Fuel, MemoryBytes: a.Memory},
		PayloadBytes:    64,
		Priority:        a.Priority,
	}
	if a.WallTime > 0 {
		req.RequestedBudget.WallTime = policy.Some(a.WallTime)
	}
	return req
}

// Admit admits a with the live clock and fails the test on rejection.
func (n *Node) Admit(t testing.TB, a Ask) *core.AdmissionPermit {
	t.Helper()
	p, err := n.Controller.Admit(Request(a))
	if err != nil {
		t.Fatalf("admit %+v: %v", a, err)
	}
	return p
}

// Eventually polls cond every millisecond until it holds or the timeout
// passes, then fails the test with what.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ShiftClock is the system clock moved by an adjustable offset; it keeps
// the monotonic reading, so deadlines bound from it compare correctly with
// real timers.
type ShiftClock struct {
	offset atomic.Int64
}

// Now returns the shifted time.
func (c *ShiftClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Since measures from t on the shifted clock.
func (c *ShiftClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Shift moves the clock by d.
func (c *ShiftClock) Shift(d time.Duration) { c.offset.Add(int64(d)) }

// ShortGrants lets admission accept grants of a few milliseconds, so that
// expiry tests need not wait long: no minimum execution time, no safety
// margin, a microsecond service estimate.
func ShortGrants(p *policy.NodeAdmissionPolicy) {
	p.Node.Deadline = policy.DeadlinePolicy{EstimatedServiceTime: time.Microsecond}
}

// Parallelism sets the parallelism of a configured cell class.
func Parallelism(p *policy.NodeAdmissionPolicy, class string, n uint64) {
	for i := range p.CellClasses {
		if p.CellClasses[i].Class == class {
			p.CellClasses[i].Parallelism = n
		}
	}
}
