package guest_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/policy"
)

// node is admission in front of the shared backend: a node policy, a
// catalog holding the deployments, a controller over both and the load
// state, as latentd wires them.
type node struct {
	provider   *core.LocalQuotaProvider
	catalog    *catalog.Catalog
	controller *core.AdmissionController
	load       *core.NodeLoadState
}

const smallCell = 64 << 20

func nodePolicy() *policy.NodeAdmissionPolicy {
	limits := policy.Limits{MaxLiveActivations: 8, MaxQueuedReservations: 8, MaxReservedCPUFuel: 1 << 50, MaxReservedMemoryBytes: 1 << 32}
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement:     policy.Placement{Architecture: "x86_64", Region: "eu-west", Zone: "eu-west-1a"},
			Backends:      []string{"wasm"},
			StateModels:   []string{"stateless"},
			BudgetCeiling: policy.NodeBudgetCeiling{CPUFuel: 1 << 40, MemoryBytes: smallCell, WallTime: 30 * time.Second},
			Limits:        limits, MaximumPayloadBytes: 1 << 20, MaximumPriority: 9,
			MaximumIdentifierBytes: 64, MaximumGeneratedIdentifierBytes: 96,
			MaximumMetadataEntries: 8, MaximumMetadataBytes: 1024,
			Overload: policy.OverloadPolicy{CPUThreshold: 0.99, MemoryThreshold: 0.99, MaximumObservationAge: time.Hour},
			Deadline: policy.DeadlinePolicy{EstimatedServiceTime: time.Millisecond, MinimumExecutionTime: time.Millisecond, SafetyMargin: time.Millisecond},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "default", MinPriority: 0, MaxPriority: 9, MaxQueued: 8}},
		CellClasses:  []policy.CellClassPolicy{{Class: "small", MemoryBytes: smallCell, Parallelism: 2, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{{Name: "standard", CellClasses: []string{"small"}, Limits: limits}},
		Tenants: []policy.TenantPolicy{{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}},
			TrustClasses: []string{"standard"}, CellClasses: []string{"small"}, MaximumPriority: 9, MaximumPayloadBytes: 1 << 20, Limits: limits}},
	}
}

func newNode(t testing.TB, deployments ...catalog.Deployment) *node {
	t.Helper()
	return newNodeWith(t, nodePolicy(), deployments...)
}

// newNodeWith is newNode under policy p.
func newNodeWith(t testing.TB, p *policy.NodeAdmissionPolicy, deployments ...catalog.Deployment) *node {
	t.Helper()
	provider, err := core.NewLocalQuotaProvider(p)
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.New(catalog.GenerousCapacity)
	for _, d := range deployments {
		if _, err := cat.Deploy(d); err != nil {
			t.Fatal(err)
		}
	}
	load := core.NewNodeLoadState(time.Hour, nil)
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	return &node{provider: provider, catalog: cat, load: load,
		controller: provider.Controller(core.ControllerConfig{Source: cat.Pin(), Load: load})}
}

var activations atomic.Uint64

// ask is what one invocation requests.
type ask struct {
	route  string
	input  string
	fuel   uint64
	memory uint64
	wall   time.Duration
}

func (n *node) request(t testing.TB, tenant, service string, a ask) *core.AdmissionRequest {
	t.Helper()
	rev, _, err := n.catalog.Pin().Resolve(catalog.Target{Tenant: tenant, Service: service, Route: a.route}, "key")
	if err != nil {
		t.Fatalf("resolve %s: %v", a.route, err)
	}
	budget := policy.Budget{CPUFuel: a.fuel, MemoryBytes: a.memory}
	if a.wall > 0 {
		budget.WallTime = policy.Some(a.wall)
	}
	return &core.AdmissionRequest{
		ActivationID:    fmt.Sprintf("act-%d", activations.Add(1)),
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: tenant},
		Revision:        *rev,
		RequestedBudget: budget,
		PayloadBytes:    uint64(len(a.input)),
	}
}

// runDirect admits a, leases a cell and runs the activation on the
// runner itself (no scheduler), with the permit's deadline on the
// context as the scheduler would set it.
func (n *node) runDirect(t *testing.T, r *runner.Runner, pool *cellpool.FixedCellPool, a ask) (runner.Report, time.Duration, error) {
	t.Helper()
	permit, err := n.controller.Admit(n.request(t, "acme", "guests", a))
	if err != nil {
		t.Fatalf("admit: %v", err)
	}
	lease, err := pool.Acquire(permit.Grant().Obligations.CellClass)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := permit.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), exec.Grant().Deadline)
	defer cancel()
	act := r.NewActivation([]byte(a.input))
	start := time.Now()
	grant := exec.Grant()
	act.Run(ctx, &grant, lease)
	exec.Release() // the scheduler's, once Run returns
	act.End(nil)
	rep, err := act.Wait(context.Background())
	return rep, time.Since(start), err
}

// outcomeCase is one way a guest ends and what the node must report.
type outcomeCase struct {
	name    string
	ask     ask
	outcome runner.Outcome
	output  string
	// within bounds how long the activation may take.
	within time.Duration
	check  func(t *testing.T, rep runner.Report)
}

const roomyFuel = 1 << 40 // about 18 minutes at one unit per nanosecond

func outcomeCases() []outcomeCase {
	return []outcomeCase{
		{name: "a Go guest that exits 0 succeeds with its standard output",
			ask: ask{route: "upper", input: "hello, guest", fuel: roomyFuel, memory: 32 << 20}, outcome: runner.Succeeded, output: "HELLO, GUEST",
			within: 10 * time.Second},
		{name: "a Go guest that exits 3 is a declared error with its standard output",
			ask: ask{route: "upper", input: "!exit 3", fuel: roomyFuel, memory: 32 << 20}, outcome: runner.DeclaredError, output: "declared error 3\n",
			within: 10 * time.Second},
		{name: "a Go guest looping forever is interrupted at the permit's deadline",
			ask: ask{route: "upper", input: "!loop", fuel: roomyFuel, memory: 32 << 20, wall: 300 * time.Millisecond}, outcome: runner.DeadlineExceeded,
			within: 5 * time.Second,
			check: func(t *testing.T, rep runner.Report) {
				if rep.Consumed.WallTime < 250*time.Millisecond {
					t.Errorf("stopped after %v, before the deadline", rep.Consumed.WallTime)
				}
			}},
		{name: "a Go guest sleeping for an hour is woken and interrupted at the deadline",
			ask: ask{route: "upper", input: "!sleep", fuel: roomyFuel, memory: 32 << 20, wall: 300 * time.Millisecond}, outcome: runner.DeadlineExceeded,
			within: 5 * time.Second},
		{name: "a Go guest looping forever is interrupted when its fuel is burnt",
			ask: ask{route: "upper", input: "!loop", fuel: 200_000_000, memory: 32 << 20, wall: 20 * time.Second}, outcome: runner.FuelExhausted,
			within: 5 * time.Second,
			check: func(t *testing.T, rep runner.Report) {
				// 2e8 units at one per nanosecond: 200ms of execution.
				if rep.Consumed.CPUFuel != 200_000_000 || rep.Consumed.WallTime < 200*time.Millisecond {
					t.Errorf("usage %+v, want the whole grant burnt in at least 200ms", rep.Consumed)
				}
			}},
		{name: "a Go guest growing memory beyond the grant is memory-exhausted",
			ask: ask{route: "upper", input: "!alloc", fuel: roomyFuel, memory: 16 << 20}, outcome: runner.MemoryExhausted,
			within: 10 * time.Second,
			check: func(t *testing.T, rep runner.Report) {
				if rep.Consumed.PeakMemoryBytes > 16<<20 || rep.Consumed.PeakMemoryBytes < 8<<20 {
					t.Errorf("peak memory %d, want up to the 16 MiB grant", rep.Consumed.PeakMemoryBytes)
				}
			}},
		{name: "a Go guest writing beyond the response bound traps, with no output",
			ask: ask{route: "upper", input: "!flood", fuel: roomyFuel, memory: 32 << 20}, outcome: runner.Trapped,
			within: 10 * time.Second},
		{name: "a guest executing unreachable traps",
			ask: ask{route: "trap", fuel: roomyFuel, memory: 1 << 20}, outcome: runner.Trapped, within: 5 * time.Second},
		{name: "a hand-assembled guest spinning in a loop is interrupted at the deadline",
			ask: ask{route: "spin", fuel: roomyFuel, memory: 1 << 20, wall: 100 * time.Millisecond}, outcome: runner.DeadlineExceeded,
			within: 5 * time.Second},
		{name: "a guest whose initial memory is over the grant never starts and is memory-exhausted",
			ask: ask{route: "bigmem", fuel: roomyFuel, memory: 1 << 20}, outcome: runner.MemoryExhausted, within: 5 * time.Second,
			check: func(t *testing.T, rep runner.Report) {
				if rep.Consumed.PeakMemoryBytes != 0 {
					t.Errorf("peak memory %d, want nothing granted", rep.Consumed.PeakMemoryBytes)
				}
			}},
		{name: "a guest that traps on a refused memory.grow is memory-exhausted",
			ask: ask{route: "grow", fuel: roomyFuel, memory: 2 << 20}, outcome: runner.MemoryExhausted, within: 5 * time.Second},
		{name: "a guest whose memory.grow fits the grant succeeds",
			ask: ask{route: "grow", fuel: roomyFuel, memory: 8 << 20}, outcome: runner.Succeeded, within: 5 * time.Second,
			check: func(t *testing.T, rep runner.Report) {
				if rep.Consumed.PeakMemoryBytes != 101*65536 {
					t.Errorf("peak memory %d, want 101 pages", rep.Consumed.PeakMemoryBytes)
				}
			}},
	}
}

// loadedMachine scales the outcome cases' time bounds for a loaded
// machine.
const loadedMachine = 6

func (c *outcomeCase) verify(t *testing.T, rep runner.Report, err error, took time.Duration) {
	t.Helper()
	if rep.Outcome != c.outcome {
		t.Fatalf("outcome %v (err %v), want %v", rep.Outcome, err, c.outcome)
	}
	if string(rep.Output) != c.output {
		t.Fatalf("output %q, want %q", truncate(rep.Output), c.output)
	}
	if rep.Disposition != runner.Released {
		t.Fatalf("cell %v, want released", rep.Disposition)
	}
	// within is what an idle machine needs with room to spare; under
	// -race beside other packages' tests on a loaded two-core machine a
	// run takes several times longer, and the bound only tells a hang.
	if took > c.within*loadedMachine {
		t.Fatalf("took %v, more than %v", took, c.within*loadedMachine)
	}
	if c.check != nil {
		c.check(t, rep)
	}
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// sharedNode is a node whose catalog holds acme/guests as the shared
// backend has it deployed.
func sharedNode(t *testing.T) *node { return newNode(t, guestsDeployment()) }

func TestOutcomesThroughTheRunner(t *testing.T) {
	for _, c := range outcomeCases() {
		t.Run(c.name, func(t *testing.T) {
			n := sharedNode(t)
			pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": shared.backend}})
			if err != nil {
				t.Fatal(err)
			}
			base := n.provider.NodeSnapshot()
			rep, took, err := n.runDirect(t, r, pool, c.ask)
			c.verify(t, rep, err, took)
			if got := n.provider.NodeSnapshot(); n.provider.LiveReservations() != 0 || got != base {
				t.Fatalf("permit not released: %d live, node %+v, want %+v", n.provider.LiveReservations(), got, base)
			}
			if s := pool.Stats(policy.Small); s.Free != s.Configured || s.Quarantined != 0 {
				t.Fatalf("pool %+v: cell not back", s)
			}
		})
	}
}

func TestOutcomesThroughThePipeline(t *testing.T) {
	for _, c := range outcomeCases() {
		t.Run(c.name, func(t *testing.T) {
			n := sharedNode(t)
			p, err := pipeline.New(n.provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": shared.backend}})
			if err != nil {
				t.Fatal(err)
			}
			base := p.Counters()
			start := time.Now()
			rep, err := p.Invoke(context.Background(), n.controller, n.request(t, "acme", "guests", c.ask), []byte(c.ask.input))
			c.verify(t, rep, err, time.Since(start))
			p.Drain()
			if got := p.Counters(); !got.Equal(base) {
				t.Fatalf("counters did not come back:\n%s", strings.Join(got.Diff(base), "\n"))
			}
		})
	}
}
