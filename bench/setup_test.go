package bench

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// permit is what both implementations hand out, reduced to the calls a
// cycle makes.
type permit interface {
	Release() bool
}

// impl is one implementation under test, behind closures so that both
// pay the same indirection.
type impl struct {
	name  string
	admit func(req *core.AdmissionRequest) (permit, error)
	// cycle admits, starts and releases.
	cycle func(req *core.AdmissionRequest) error
}

// env is one benchmark's node: a policy, a catalog pin, a load sample and
// both implementations over them.
type env struct {
	policy *policy.NodeAdmissionPolicy
	pin    *catalog.Pin
	load   *core.NodeLoadState
	ledger *core.LocalQuotaProvider
	naive  *model.Model
	impls  []impl
	valid  core.AdmissionRequest // acme/thumbs/resize, resolved
	other  core.AdmissionRequest // globex/render/tiny, resolved
	// spread are the spread workload's requests, one per tenant
	// spread-0, spread-1, ...: each a copy of acme's, with acme's limits
	// and its own copy of acme's thumbs/resize deployment.
	spread []core.AdmissionRequest
}

// spreadTenants is how many tenants the spread workload has: one per
// goroutine at any -cpu up to it (and at least the machine's cores).
var spreadTenants = max(64, runtime.NumCPU())

// newEnv builds the node: the example policy with roomy limits for acme,
// globex limited to tenantLimit live reservations, and a long observation
// age so that one sample serves a whole benchmark.
func newEnv(b testing.TB, tenantLimit uint64, cpu float64) *env {
	b.Helper()
	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		b.Fatal(err)
	}
	pol, err := policy.DecodePolicy(data)
	if err != nil {
		b.Fatal(err)
	}
	roomy := policy.Limits{MaxLiveActivations: 1 << 16, MaxQueuedReservations: 1 << 16, MaxReservedCPUFuel: 1 << 62, MaxReservedMemoryBytes: 1 << 62}
	pol.Node.Limits = roomy
	for i := range pol.TrustClasses {
		pol.TrustClasses[i].Limits = roomy
	}
	for i := range pol.QueueClasses {
		pol.QueueClasses[i].MaxQueued = 1 << 16
	}
	for i := range pol.CellClasses {
		pol.CellClasses[i].Parallelism = 1 << 16
	}
	pol.Tenants[0].Limits = roomy
	for i := range spreadTenants {
		t := pol.Tenants[0]
		t.ID = "spread-" + strconv.Itoa(i)
		pol.Tenants = append(pol.Tenants, t)
	}
	pol.Tenants[1].Limits = policy.Limits{MaxLiveActivations: tenantLimit, MaxQueuedReservations: tenantLimit, MaxReservedCPUFuel: 1 << 62, MaxReservedMemoryBytes: 1 << 62}
	pol.Node.Overload.MaximumObservationAge = time.Hour

	catData, err := os.ReadFile("../testdata/catalog/good.json")
	if err != nil {
		b.Fatal(err)
	}
	file, err := catalog.DecodeCatalogFile(catData, true)
	if err != nil {
		b.Fatal(err)
	}
	thumbs := file.Deployments[0]
	if thumbs.Tenant != "acme" || thumbs.Service != "thumbs" || thumbs.Routes[0].Name != "resize" {
		b.Fatal("the catalog's first deployment is no longer acme/thumbs/resize")
	}
	for i := range spreadTenants {
		d := catalog.Deployment{Tenant: "spread-" + strconv.Itoa(i), Service: "thumbs", Routes: thumbs.Routes[:1]}
		file.Deployments = append(file.Deployments, d)
	}
	file.Capacity.MaxRevisions += uint64(spreadTenants)
	file.Capacity.MaxPolicyBytes *= uint64(spreadTenants)
	cat, err := catalog.FromFile(file)
	if err != nil {
		b.Fatal(err)
	}
	e := &env{policy: pol, pin: cat.Pin(), load: core.NewNodeLoadState(time.Minute, nil)}
	if err := e.load.Publish(core.LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: cpu, MemoryPressure: 0.2}); err != nil {
		b.Fatal(err)
	}
	if e.ledger, err = core.NewLocalQuotaProvider(pol); err != nil {
		b.Fatal(err)
	}
	if e.naive, err = model.New(pol); err != nil {
		b.Fatal(err)
	}
	e.valid = e.request(b, "acme", "alice", catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"})
	e.other = e.request(b, "globex", "bob", catalog.Target{Tenant: "globex", Service: "render", Route: "tiny"})
	for i := range spreadTenants {
		tenant := "spread-" + strconv.Itoa(i)
		e.spread = append(e.spread, e.request(b, tenant, "alice", catalog.Target{Tenant: tenant, Service: "thumbs", Route: "resize"}))
	}

	ledger := e.ledger.Controller(core.ControllerConfig{Source: e.pin, Load: e.load})
	naive := e.naive.Controller(e.pin, e.load, nil)
	e.impls = []impl{
		implOf[*core.AdmissionPermit, *core.ExecutionPermit]("ledger", ledger.Admit),
		implOf[*model.Permit, *model.Permit]("naive", naive.Admit),
	}
	return e
}

// implOf wraps an implementation's Admit, whatever its permit types.
func implOf[P interface {
	Release() bool
	StartExecution() (X, error)
}, X interface{ Release() bool }](name string, admitNow func(*core.AdmissionRequest) (P, error)) impl {
	return impl{
		name: name,
		admit: func(req *core.AdmissionRequest) (permit, error) {
			p, err := admitNow(req)
			if err != nil {
				return nil, err
			}
			return p, nil
		},
		cycle: func(req *core.AdmissionRequest) error {
			p, err := admitNow(req)
			if err != nil {
				return err
			}
			x, err := p.StartExecution()
			if err != nil {
				return err
			}
			x.Release()
			return nil
		},
	}
}

// request resolves target through the pin, as latentd does: the request
// names no identity, and its handle carries the revision.
func (e *env) request(b testing.TB, tenant, subject string, target catalog.Target) core.AdmissionRequest {
	b.Helper()
	_, handle, err := e.pin.Resolve(target, "routing-key-1")
	if err != nil {
		b.Fatal(err)
	}
	return core.AdmissionRequest{
		ActivationID:    "act-1",
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: subject, Tenant: tenant},
		Handle:          handle,
		RequestedBudget: policy.Budget{CPUFuel: 1_000_000, MemoryBytes: 8 << 20},
		PayloadBytes:    1024,
		Priority:        3,
	}
}

// fillOther holds globex's whole allowance in both implementations, so
// that its next request is a capacity rejection.
func (e *env) fillOther(b testing.TB, limit int) (release func()) {
	b.Helper()
	var held []permit
	for _, im := range e.impls {
		for i := 0; i < limit; i++ {
			req := e.other
			req.ActivationID = "hold-" + string(rune('a'+i))
			p, err := im.admit(&req)
			if err != nil {
				b.Fatalf("%s: filling: %v", im.name, err)
			}
			held = append(held, p)
		}
	}
	return func() {
		for _, p := range held {
			p.Release()
		}
	}
}
