package core_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/internal/model/gen"
	"latent.dev/admission/policy"
)

// This file checks that concurrent admissions, starts and releases on the
// real controller are linearizable: every history of calls and returns
// recorded from racing goroutines can be explained by some sequential
// order of the same calls against ledgerSpec, a compact sequential
// specification of the ledger. TestLedgerSpecAgreesWithModel holds that
// specification to internal/model, so the chain is core ~ spec ~ model.
//
// Time plays no part: every call uses the same instant, the load sample
// never goes stale, and feasibility always holds, so the only shared
// state is the ledger.

const (
	linTenants   = 2
	linIDs       = 4 // activation IDs per tenant
	linKeys      = linTenants * linIDs
	linClients   = 6
	linHistories = 20
	linOpsEach   = 34 // per client, so about 200 operations per history
)

var linEpoch = time.UnixMilli(1767225600000)

// linPolicy has limits small enough that every scope and dimension the
// history can reach is hit: node live, queued and fuel; acme's memory
// (two grants), globex's live slots (two); the trust class's queued
// slots (two); queue class low (one). Grants are 1 or 2 fuel and 1 memory.
func linPolicy() *policy.NodeAdmissionPolicy {
	big := uint64(1000)
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement:           policy.Placement{Architecture: "x86_64", Region: "eu", Zone: "a"},
			Backends:            []string{"wasm"},
			StateModels:         []string{"stateless"},
			BudgetCeiling:       policy.NodeBudgetCeiling{CPUFuel: big, MemoryBytes: big, WallTime: time.Hour},
			Limits:              policy.Limits{MaxLiveActivations: 4, MaxQueuedReservations: 3, MaxReservedCPUFuel: 6, MaxReservedMemoryBytes: big},
			MaximumPayloadBytes: big, MaximumPriority: 1, MaximumIdentifierBytes: 32, MaximumGeneratedIdentifierBytes: 83,
			MaximumMetadataEntries: 4, MaximumMetadataBytes: 64,
			Overload: policy.OverloadPolicy{CPUThreshold: 1, MemoryThreshold: 1, MaximumObservationAge: time.Hour},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "low", MinPriority: 0, MaxPriority: 0, MaxQueued: 1}, {Name: "high", MinPriority: 1, MaxPriority: 1, MaxQueued: 3}},
		CellClasses:  []policy.CellClassPolicy{{Class: "standard", MemoryBytes: big, Parallelism: big, Threading: []string{"single"}}},
		TrustClasses: []policy.TrustClassPolicy{{Name: "standard", CellClasses: []string{"standard"},
			Limits: policy.Limits{MaxLiveActivations: 6, MaxQueuedReservations: 2, MaxReservedCPUFuel: big, MaxReservedMemoryBytes: big}}},
		Tenants: []policy.TenantPolicy{
			{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}}, TrustClasses: []string{"standard"},
				CellClasses: []string{"standard"}, MaximumPriority: 1, MaximumPayloadBytes: big,
				Limits: policy.Limits{MaxLiveActivations: 3, MaxQueuedReservations: 3, MaxReservedCPUFuel: big, MaxReservedMemoryBytes: 2}},
			{ID: "globex", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}}, TrustClasses: []string{"standard"},
				CellClasses: []string{"standard"}, MaximumPriority: 1, MaximumPayloadBytes: big,
				Limits: policy.Limits{MaxLiveActivations: 2, MaxQueuedReservations: 2, MaxReservedCPUFuel: big, MaxReservedMemoryBytes: big}},
		},
	}
}

// linSetup is a source deploying one revision per tenant and a load
// sample that stays fresh for the whole test.
func linSetup(t testing.TB) (core.RevisionPolicySource, *core.NodeLoadState) {
	t.Helper()
	src := &gen.Source{}
	for _, tenant := range []string{"acme", "globex"} {
		src.Entries = append(src.Entries, gen.Entry{Revision: linRevision(tenant),
			Policy: &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless"}})
	}
	load := core.NewNodeLoadState(time.Hour, fixedClock{linEpoch})
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: linEpoch}); err != nil {
		t.Fatal(err)
	}
	return src, load
}

func linRevision(tenant string) policy.ResolvedRevision {
	return policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: tenant, Service: "svc", Route: "r", Contract: "c", Function: "f",
		Revision: "rev", Release: "rel", Generation: 1}}
}

func linRequest(tenant, id, priority int, fuel uint64) *core.AdmissionRequest {
	name := []string{"acme", "globex"}[tenant]
	return &core.AdmissionRequest{
		ActivationID:    fmt.Sprintf("id-%d", id),
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: name},
		Revision:        linRevision(name),
		RequestedBudget: policy.Budget{CPUFuel: fuel, MemoryBytes: 1},
		Priority:        uint32(priority),
	}
}

type linOpKind uint8

const (
	linAdmit linOpKind = iota
	linStart
	linReleaseAdmission
	linReleaseExecution
)

// linInput is one call. self is the call's index in the history: for an
// admission it is the identity of the permit it may issue; permit names
// the admission whose permit a start or release uses.
type linInput struct {
	kind     linOpKind
	tenant   int
	id       int
	priority int
	fuel     uint64
	self     int
	permit   int
}

// linOutput is what a call returned: success (or a release's result) and
// the error text of a failure.
type linOutput struct {
	ok   bool
	text string
}

// linEntry is the live reservation of one (tenant, activation ID) key;
// permit is the issuing admission's self + 1, zero when the key is free.
type linEntry struct {
	permit    int32
	executing bool
	priority  uint8
	fuel      uint8
}

// ledgerState is the whole ledger, as a comparable value: the live entry
// of every key. Every counter derives from it.
type ledgerState [linKeys]linEntry

func capacityText(scope, dimension string, retryable bool) string {
	return fmt.Sprintf("admission.limit: resource-exhausted scope=%s dimension=%s reason=capacity-exhausted retryable=%t", scope, dimension, retryable)
}

const (
	linDuplicateText  = "admission.limit: already-exists scope=request dimension=activation-id reason=activation-id-unavailable retryable=false"
	linNotLiveText    = "admission.limit: failed-precondition scope=permit dimension=permit reason=permit-not-live retryable=false"
	linTrustClassName = "standard"
)

// admitAnswer is the decision table's step 13 for the compact state: the duplicate
// key, then capacity node, tenant, trust class (live, queued, fuel,
// memory), then the queue class. It returns "" when the request fits.
func (s *ledgerState) admitAnswer(p *policy.NodeAdmissionPolicy, in linInput) string {
	if s[in.tenant*linIDs+in.id].permit != 0 {
		return linDuplicateText
	}
	type counters struct{ live, queued, fuel, memory uint64 }
	var node, tenant, trust counters
	var queue [2]uint64
	for k, e := range s {
		if e.permit == 0 {
			continue
		}
		queued := uint64(0)
		if !e.executing {
			queued = 1
			queue[e.priority]++
		}
		for _, c := range []*counters{&node, &trust} {
			c.live, c.queued, c.fuel, c.memory = c.live+1, c.queued+queued, c.fuel+uint64(e.fuel), c.memory+1
		}
		if k/linIDs == in.tenant {
			tenant.live, tenant.queued, tenant.fuel, tenant.memory = tenant.live+1, tenant.queued+queued, tenant.fuel+uint64(e.fuel), tenant.memory+1
		}
	}
	scopes := []struct {
		name   string
		used   counters
		limits policy.Limits
	}{
		{"node", node, p.Node.Limits},
		{"tenant", tenant, p.Tenants[in.tenant].Limits},
		{"trust-class", trust, p.TrustClasses[0].Limits},
	}
	for _, sc := range scopes {
		dims := []struct {
			name              string
			used, need, limit uint64
		}{
			{"live-activations", sc.used.live, 1, sc.limits.MaxLiveActivations},
			{"queued-reservations", sc.used.queued, 1, sc.limits.MaxQueuedReservations},
			{"cpu-fuel", sc.used.fuel, in.fuel, sc.limits.MaxReservedCPUFuel},
			{"memory-bytes", sc.used.memory, 1, sc.limits.MaxReservedMemoryBytes},
		}
		for _, d := range dims {
			if d.used+d.need > d.limit {
				return capacityText(sc.name, d.name, d.need <= d.limit)
			}
		}
	}
	if queue[in.priority]+1 > p.QueueClasses[in.priority].MaxQueued {
		return capacityText("queue-class", "queued-reservations", true)
	}
	return ""
}

// find returns the key holding permit, or -1.
func (s *ledgerState) find(permit int) int {
	for k, e := range s {
		if e.permit != 0 && int(e.permit) == permit+1 {
			return k
		}
	}
	return -1
}

// step is the sequential specification: what the call must return in
// state s, and the state after it.
func (s ledgerState) step(p *policy.NodeAdmissionPolicy, in linInput) (linOutput, ledgerState) {
	switch in.kind {
	case linAdmit:
		if text := s.admitAnswer(p, in); text != "" {
			return linOutput{text: text}, s
		}
		s[in.tenant*linIDs+in.id] = linEntry{permit: int32(in.self + 1), priority: uint8(in.priority), fuel: uint8(in.fuel)}
		return linOutput{ok: true}, s
	case linStart:
		k := s.find(in.permit)
		if k < 0 || s[k].executing {
			return linOutput{text: linNotLiveText}, s
		}
		s[k].executing = true
		return linOutput{ok: true}, s
	default:
		k := s.find(in.permit)
		if k < 0 || s[k].executing != (in.kind == linReleaseExecution) {
			return linOutput{}, s
		}
		s[k] = linEntry{}
		return linOutput{ok: true}, s
	}
}

func ledgerSpec(p *policy.NodeAdmissionPolicy) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return ledgerState{} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			want, next := state.(ledgerState).step(p, input.(linInput))
			return want == output.(linOutput), next
		},
		Hash: func(state interface{}) uint64 {
			h := fnv.New64a()
			for _, e := range state.(ledgerState) {
				var executing byte
				if e.executing {
					executing = 1
				}
				_, _ = h.Write([]byte{byte(e.permit), byte(e.permit >> 8), byte(e.permit >> 16), executing, e.priority, e.fuel})
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			return input.(linInput).describe(output.(linOutput))
		},
	}
}

// describe is one call and its result, for a failure's report.
func (in linInput) describe(out linOutput) string {
	switch in.kind {
	case linAdmit:
		return fmt.Sprintf("admit t%d id%d priority %d fuel %d -> %v %s", in.tenant, in.id, in.priority, in.fuel, out.ok, out.text)
	case linStart:
		return fmt.Sprintf("start #%d -> %v %s", in.permit, out.ok, out.text)
	case linReleaseAdmission:
		return fmt.Sprintf("release queued #%d -> %v", in.permit, out.ok)
	}
	return fmt.Sprintf("release executing #%d -> %v", in.permit, out.ok)
}

// fixedClock is a clock that never moves, for Admit in the history.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                  { return c.now }
func (c fixedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// heldPermit is a permit a client holds, by the admission that issued it.
type heldPermit struct {
	admission int
	permit    *core.AdmissionPermit
	execution *core.ExecutionPermit
}

// recordHistory runs linClients goroutines against one fresh controller
// and returns what they called and got, with logical call and return
// times from one shared counter.
func recordHistory(t *testing.T, seed uint64) []porcupine.Operation {
	src, load := linSetup(t)
	provider, err := core.NewLocalQuotaProvider(linPolicy())
	if err != nil {
		t.Fatal(err)
	}
	ctl := provider.Controller(core.ControllerConfig{Source: src, Load: load, Clock: fixedClock{linEpoch}})
	var (
		clock   atomic.Int64
		nextOp  atomic.Int64
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
		start   = make(chan struct{})
	)
	for client := 0; client < linClients; client++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(client)))
			var held, released []heldPermit
			var ops []porcupine.Operation
			<-start
			for range linOpsEach {
				if rng.IntN(2) == 0 {
					runtime.Gosched() // interleave the clients, not run them one after another
				}
				in := linInput{self: int(nextOp.Add(1))}
				var out linOutput
				var call, ret int64
				action := "admit"
				if r := rng.IntN(100); r >= 45 && r < 90 && len(held) > 0 {
					action = "use"
				} else if r >= 90 && len(released) > 0 {
					action = "misuse"
				}
				switch action {
				case "admit":
					in.kind, in.tenant, in.id, in.priority = linAdmit, rng.IntN(linTenants), rng.IntN(linIDs), rng.IntN(2)
					in.fuel = uint64(1 + rng.IntN(2))
					req := linRequest(in.tenant, in.id, in.priority, in.fuel)
					now := rng.IntN(2) == 0
					var (
						p   *core.AdmissionPermit
						err error
					)
					call = clock.Add(1)
					if now {
						p, err = ctl.Admit(req)
					} else {
						p, err = ctl.AdmitAt(req, linEpoch)
					}
					ret = clock.Add(1)
					if out.ok = err == nil; out.ok {
						held = append(held, heldPermit{admission: in.self, permit: p})
					} else {
						out.text = err.Error()
					}
				case "use":
					i := rng.IntN(len(held))
					h := &held[i]
					in.permit = h.admission
					switch {
					case h.execution == nil && rng.IntN(2) == 0:
						in.kind = linStart
						call = clock.Add(1)
						e, err := h.permit.StartExecutionAt(linEpoch)
						ret = clock.Add(1)
						if out.ok = err == nil; out.ok {
							h.execution = e
						} else {
							out.text = err.Error()
						}
					case h.execution == nil:
						in.kind = linReleaseAdmission
						call = clock.Add(1)
						out.ok = h.permit.Release()
						ret = clock.Add(1)
					default:
						in.kind = linReleaseExecution
						call = clock.Add(1)
						out.ok = h.execution.Release()
						ret = clock.Add(1)
					}
					if in.kind != linStart {
						released = append(released, *h)
						held = append(held[:i], held[i+1:]...)
					}
				default:
					// Misuse: release or start a permit again after release.
					h := released[rng.IntN(len(released))]
					in.permit = h.admission
					switch rng.IntN(3) {
					case 0:
						in.kind = linReleaseAdmission
						call = clock.Add(1)
						out.ok = h.permit.Release()
						ret = clock.Add(1)
					case 1:
						in.kind = linStart
						call = clock.Add(1)
						_, err := h.permit.StartExecutionAt(linEpoch)
						ret = clock.Add(1)
						out.ok = err == nil
						if err != nil {
							out.text = err.Error()
						}
					default:
						in.kind = linReleaseExecution // nil when it never started
						call = clock.Add(1)
						out.ok = h.execution.Release()
						ret = clock.Add(1)
					}
				}
				ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			}
			// Hand back what is still held; these calls are history too.
			for _, h := range held {
				in := linInput{self: int(nextOp.Add(1)), permit: h.admission, kind: linReleaseAdmission}
				var out linOutput
				call := clock.Add(1)
				if h.execution != nil {
					in.kind = linReleaseExecution
					out.ok = h.execution.Release()
				} else {
					out.ok = h.permit.Release()
				}
				ret := clock.Add(1)
				ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			}
			mu.Lock()
			history = append(history, ops...)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if s := provider.NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		t.Fatalf("the ledger is not empty after every permit was released: %+v", s)
	}
	return history
}

// TestLinearizableLedger records linHistories concurrent histories and
// checks each against the sequential specification.
func TestLinearizableLedger(t *testing.T) {
	p := linPolicy()
	spec := ledgerSpec(p)
	outcomes := map[string]int{}
	for h := 0; h < linHistories; h++ {
		history := recordHistory(t, uint64(h)+1)
		for _, op := range history {
			out := op.Output.(linOutput)
			key := fmt.Sprintf("%d %v %s", op.Input.(linInput).kind, out.ok, out.text)
			outcomes[key]++
		}
		result, info := porcupine.CheckOperationsVerbose(spec, history, 10*time.Second)
		switch result {
		case porcupine.Illegal:
			for _, partial := range info.PartialLinearizationsOperations() {
				for _, linearization := range partial {
					for _, op := range linearization {
						t.Logf("  %s", spec.DescribeOperation(op.Input, op.Output))
					}
					break
				}
			}
			t.Fatalf("history %d is not linearizable (longest linearizable prefix above)", h)
		case porcupine.Unknown:
			t.Fatalf("history %d: the checker timed out", h)
		}
	}
	// Every capacity row the policy can reach must have happened, or the
	// histories did not exercise the contention they claim to.
	for _, text := range []string{
		capacityText("node", "live-activations", true), capacityText("node", "cpu-fuel", true),
		capacityText("tenant", "memory-bytes", true), capacityText("tenant", "live-activations", true),
		capacityText("trust-class", "queued-reservations", true), capacityText("queue-class", "queued-reservations", true),
		linDuplicateText,
	} {
		if outcomes[fmt.Sprintf("%d false %s", linAdmit, text)] == 0 {
			t.Errorf("no admission was rejected with %q", text)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestLedgerSpecAgreesWithModel runs random sequential calls through the
// reference model and the specification used above: they must agree on
// every answer, so the specification is the model's ledger, restated.
func TestLedgerSpecAgreesWithModel(t *testing.T) {
	p := linPolicy()
	src, load := linSetup(t)
	rng := rand.New(rand.NewPCG(7, 7))
	for round := 0; round < 50; round++ {
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		ctl := m.Controller(src, load, fixedClock{linEpoch})
		var state ledgerState
		admissions := map[int]*model.Permit{}
		executions := map[int]*model.Permit{}
		for self := 0; self < 200; self++ {
			in := linInput{self: self, permit: rng.IntN(self + 1)}
			var got linOutput
			switch rng.IntN(4) {
			case 0, 1:
				in.kind, in.tenant, in.id, in.priority, in.fuel = linAdmit, rng.IntN(linTenants), rng.IntN(linIDs), rng.IntN(2), uint64(1+rng.IntN(2))
				permit, err := ctl.AdmitAt(linRequest(in.tenant, in.id, in.priority, in.fuel), linEpoch)
				if got.ok = err == nil; got.ok {
					admissions[self] = permit
				} else {
					got.text = err.Error()
				}
			case 2:
				in.kind = linStart
				e, err := admissions[in.permit].StartExecutionAt(linEpoch)
				if got.ok = err == nil; got.ok {
					executions[in.permit] = e
				} else {
					got.text = err.Error()
				}
			default:
				in.kind = linReleaseAdmission
				if rng.IntN(2) == 0 {
					in.kind = linReleaseExecution
					got.ok = executions[in.permit].Release()
				} else {
					got.ok = admissions[in.permit].Release()
				}
			}
			want, next := state.step(p, in)
			if got != want {
				t.Fatalf("round %d call %d %+v: model %+v, spec %+v", round, self, in, got, want)
			}
			state = next
		}
	}
}
