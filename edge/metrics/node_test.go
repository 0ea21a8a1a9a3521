package metrics_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// subjects maps the example policy's tenants to an allowlisted user.
var subjects = map[string]string{"acme": "alice", "globex": "bob", "initech": "carol", "umbrella": "dave"}

// source deploys one single-threaded wasm revision per tenant of the
// example policy.
type source struct{}

func (source) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	want := revision(rev.Tenant)
	if _, ok := subjects[rev.Tenant]; !ok || rev.Service != want.Service || rev.Route != want.Route || rev.Contract != want.Contract ||
		rev.Function != want.Function || rev.Revision != want.Revision || rev.Release != want.Release || rev.Generation != want.Generation {
		return nil, false
	}
	return &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded,
		StateModel: "stateless", CallDepthLimit: 4}, true
}

func revision(tenant string) policy.ResolvedRevision {
	return policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: tenant, Service: "svc", Route: "run", Contract: "c.v1",
		Function: "run", Revision: "rev-" + tenant, Release: "rel-" + tenant, Generation: 1}}
}

var ids atomic.Uint64

// request is a valid request of tenant for its revision.
func request(tenant string) *core.AdmissionRequest {
	return &core.AdmissionRequest{
		ActivationID:    fmt.Sprintf("act-%d", ids.Add(1)),
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: subjects[tenant], Tenant: tenant},
		Revision:        revision(tenant),
		RequestedBudget: policy.Budget{CPUFuel: 1_000_000, MemoryBytes: 1 << 20},
		PayloadBytes:    64,
	}
}

// manualClock reads a time the test sets.
type manualClock struct{ now atomic.Int64 }

func (c *manualClock) set(t time.Time)                 { c.now.Store(t.UnixNano()) }
func (c *manualClock) Now() time.Time                  { return time.Unix(0, c.now.Load()) }
func (c *manualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// node is a provider over the example policy, a load state and a
// controller, all on one manual clock starting at t0.
type node struct {
	policy     *policy.NodeAdmissionPolicy
	provider   *core.LocalQuotaProvider
	load       *core.NodeLoadState
	controller *core.AdmissionController
	clock      *manualClock
	t0         time.Time
}

func newNode(t testing.TB) *node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "policy", "node.json"))
	require.NoError(t, err)
	p, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	provider, err := core.NewLocalQuotaProvider(p)
	require.NoError(t, err)
	n := &node{policy: p, provider: provider, clock: &manualClock{}, t0: time.Unix(1_700_000_000, 0)}
	n.clock.set(n.t0)
	n.load = core.NewNodeLoadState(p.Node.Overload.MaximumObservationAge, n.clock)
	n.controller = provider.Controller(core.ControllerConfig{Source: source{}, Load: n.load, Clock: n.clock})
	return n
}
