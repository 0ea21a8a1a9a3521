package core_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/policy"
)

// The fleet scope in the linearizability check: acme is fleet-limited,
// and a client publishes, expires and withdraws its slice while the
// others admit, start and release. The specification is ledgerSpec's
// with the slice beside the ledger, judged after the tenant scope.

const (
	linFleetTenant = 0 // acme
	linFleetText   = "admission.limit: unavailable scope=fleet dimension=fleet-slice reason=fleet-unavailable retryable=true"
)

var linFleetFullText = capacityText("fleet", "live-activations", true)

func linFleetPolicy() *policy.NodeAdmissionPolicy {
	p := linPolicy()
	p.Fleet.Tenants = []string{"acme"}
	return p
}

// fleetInput is a ledger call, or a publish (slice >= 0; expired: its
// deadline is the histories' one instant) or a withdrawal of acme's
// slice.
type fleetInput struct {
	linInput
	publish, withdraw bool
	slice             int8
	expired           bool
}

// fleetState is the ledger and acme's slice (-1: none).
type fleetState struct {
	ledger  ledgerState
	slice   int8
	expired bool
}

// beforeFleet is p with the scopes after the fleet's (trust class, queue
// class) unlimited: admitAnswer under it answers the duplicate, node and
// tenant checks only.
func beforeFleet(p *policy.NodeAdmissionPolicy) *policy.NodeAdmissionPolicy {
	c := *p
	c.TrustClasses = []policy.TrustClassPolicy{p.TrustClasses[0]}
	big := uint64(1) << 40
	c.TrustClasses[0].Limits = policy.Limits{MaxLiveActivations: big, MaxQueuedReservations: big, MaxReservedCPUFuel: big, MaxReservedMemoryBytes: big}
	c.QueueClasses = append([]policy.QueueClassPolicy(nil), p.QueueClasses...)
	for i := range c.QueueClasses {
		c.QueueClasses[i].MaxQueued = big
	}
	return &c
}

func (s fleetState) step(p, early *policy.NodeAdmissionPolicy, in fleetInput) (linOutput, fleetState) {
	switch {
	case in.publish:
		s.slice, s.expired = in.slice, in.expired
		return linOutput{ok: true}, s
	case in.withdraw:
		s.slice = -1
		return linOutput{ok: true}, s
	case in.kind == linAdmit && in.tenant == linFleetTenant:
		if text := s.ledger.admitAnswer(early, in.linInput); text != "" {
			return linOutput{text: text}, s
		}
		if s.slice < 0 || s.expired {
			return linOutput{text: linFleetText}, s
		}
		live := 0
		for k, e := range s.ledger {
			if e.permit != 0 && k/linIDs == linFleetTenant {
				live++
			}
		}
		if live+1 > int(s.slice) {
			return linOutput{text: linFleetFullText}, s
		}
	}
	out, next := s.ledger.step(p, in.linInput)
	s.ledger = next
	return out, s
}

func fleetSpec(p *policy.NodeAdmissionPolicy) porcupine.Model {
	early := beforeFleet(p)
	return porcupine.Model{
		Init: func() interface{} { return fleetState{slice: -1} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			want, next := state.(fleetState).step(p, early, input.(fleetInput))
			return want == output.(linOutput), next
		},
		Hash: func(state interface{}) uint64 {
			s := state.(fleetState)
			h := fnv.New64a()
			for _, e := range s.ledger {
				var executing byte
				if e.executing {
					executing = 1
				}
				_, _ = h.Write([]byte{byte(e.permit), byte(e.permit >> 8), byte(e.permit >> 16), executing, e.priority, e.fuel})
			}
			expired := byte(0)
			if s.expired {
				expired = 1
			}
			_, _ = h.Write([]byte{byte(s.slice), expired})
			return h.Sum64()
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(fleetInput), output.(linOutput)
			switch {
			case in.publish:
				return fmt.Sprintf("publish %d expired=%v", in.slice, in.expired)
			case in.withdraw:
				return "withdraw"
			}
			return in.describe(out)
		},
	}
}

// recordFleetHistory runs linClients goroutines against one controller;
// client 0 also publishes and withdraws acme's slice.
func recordFleetHistory(t *testing.T, seed uint64) []porcupine.Operation {
	return recordFleetHistoryOf(t, seed, linClients, linOpsEach)
}

func recordFleetHistoryOf(t *testing.T, seed uint64, clients, opsEach int) []porcupine.Operation {
	src, load := linSetup(t)
	provider, err := core.NewLocalQuotaProvider(linFleetPolicy())
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
	for client := 0; client < clients; client++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(client)))
			var held []heldPermit
			var ops []porcupine.Operation
			<-start
			for range opsEach {
				if rng.IntN(2) == 0 {
					runtime.Gosched()
				}
				in := fleetInput{linInput: linInput{self: int(nextOp.Add(1))}}
				var out linOutput
				var call, ret int64
				r := rng.IntN(100)
				switch {
				case client == 0 && r < 40:
					if r < 5 {
						in.withdraw = true
						call = clock.Add(1)
						out.ok = provider.WithdrawFleetSlice("acme")
						ret = clock.Add(1)
						break
					}
					in.publish, in.slice, in.expired = true, int8(rng.IntN(4)), rng.IntN(4) == 0
					until := linEpoch.Add(time.Hour)
					if in.expired {
						until = linEpoch // the deadline equal to now has passed
					}
					call = clock.Add(1)
					out.ok = provider.PublishFleetSlice("acme", int64(in.slice), until) == nil
					ret = clock.Add(1)
				case r < 60 || len(held) == 0:
					in.kind, in.tenant, in.id, in.priority = linAdmit, rng.IntN(linTenants), rng.IntN(linIDs), rng.IntN(2)
					in.fuel = uint64(1 + rng.IntN(2))
					req := linRequest(in.tenant, in.id, in.priority, in.fuel)
					var (
						p   *core.AdmissionPermit
						err error
					)
					call = clock.Add(1)
					if rng.IntN(2) == 0 {
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
				default:
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
						held = append(held[:i], held[i+1:]...)
					}
				}
				ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			}
			for _, h := range held {
				in := fleetInput{linInput: linInput{self: int(nextOp.Add(1)), permit: h.admission, kind: linReleaseAdmission}}
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
	if s := provider.NodeSnapshot(); s.Live != 0 || s.Queued != 0 {
		t.Fatalf("the ledger is not empty after every permit was released: %+v", s)
	}
	return history
}

// TestLinearizableFleet checks concurrent histories with slice publishes
// against fleetSpec, and that both fleet answers happened.
func TestLinearizableFleet(t *testing.T) {
	p := linFleetPolicy()
	spec := fleetSpec(p)
	outcomes := map[string]int{}
	for h := 0; h < linHistories; h++ {
		history := recordFleetHistory(t, uint64(h)+100)
		for _, op := range history {
			if out := op.Output.(linOutput); !out.ok {
				outcomes[out.text]++
			}
		}
		result, info := porcupine.CheckOperationsVerbose(spec, history, 10*time.Second)
		switch result {
		case porcupine.Illegal:
			// The longest linearizable prefix, then the whole history
			// by call: enough to find the answers no instant explains.
			for _, partial := range info.PartialLinearizationsOperations() {
				longest := 0
				for i := range partial {
					if len(partial[i]) > len(partial[longest]) {
						longest = i
					}
				}
				for _, op := range partial[longest] {
					t.Logf("  %s", spec.DescribeOperation(op.Input, op.Output))
				}
			}
			sort.Slice(history, func(i, j int) bool { return history[i].Call < history[j].Call })
			for _, op := range history {
				t.Logf("client %d [%d, %d] #%d %s", op.ClientId, op.Call, op.Return, op.Input.(fleetInput).self, spec.DescribeOperation(op.Input, op.Output))
			}
			t.Fatalf("history %d is not linearizable (its longest linearizable prefix, then the whole history, above)", h)
		case porcupine.Unknown:
			t.Fatalf("history %d: the checker timed out", h)
		}
	}
	for _, text := range []string{linFleetText, linFleetFullText} {
		if outcomes[text] == 0 {
			t.Errorf("no admission was rejected with %q", text)
		}
	}
	t.Logf("rejections: %v", outcomes)
}

// TestFleetSpecAgreesWithModel holds fleetSpec to the reference model on
// random sequential calls, publishes included.
func TestFleetSpecAgreesWithModel(t *testing.T) {
	p := linFleetPolicy()
	early := beforeFleet(p)
	src, load := linSetup(t)
	rng := rand.New(rand.NewPCG(9, 9))
	seen := map[string]int{}
	for round := 0; round < 50; round++ {
		m, err := model.New(p)
		if err != nil {
			t.Fatal(err)
		}
		ctl := m.Controller(src, load, fixedClock{linEpoch})
		state := fleetState{slice: -1}
		admissions := map[int]*model.Permit{}
		executions := map[int]*model.Permit{}
		for self := 0; self < 200; self++ {
			in := fleetInput{linInput: linInput{self: self, permit: rng.IntN(self + 1)}}
			var got linOutput
			switch rng.IntN(6) {
			case 0:
				if rng.IntN(4) == 0 {
					in.withdraw = true
					got.ok = m.WithdrawFleetSlice("acme")
					break
				}
				in.publish, in.slice, in.expired = true, int8(rng.IntN(4)), rng.IntN(4) == 0
				until := linEpoch.Add(time.Hour)
				if in.expired {
					until = linEpoch
				}
				got.ok = m.PublishFleetSlice("acme", int64(in.slice), until) == nil
			case 1, 2:
				in.kind, in.tenant, in.id, in.priority, in.fuel = linAdmit, rng.IntN(linTenants), rng.IntN(linIDs), rng.IntN(2), uint64(1+rng.IntN(2))
				permit, err := ctl.AdmitAt(linRequest(in.tenant, in.id, in.priority, in.fuel), linEpoch)
				if got.ok = err == nil; got.ok {
					admissions[self] = permit
				} else {
					got.text = err.Error()
				}
			case 3:
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
			want, next := state.step(p, early, in)
			if got != want {
				t.Fatalf("round %d call %d %+v: model %+v, spec %+v", round, self, in, got, want)
			}
			state = next
			seen[got.text]++
		}
	}
	for _, text := range []string{linFleetText, linFleetFullText} {
		if seen[text] == 0 {
			t.Errorf("the model never answered %q", text)
		}
	}
}

// TestLinearizableShortHistories checks many short histories (3 clients,
// 6 calls each): a pre-check racing a release is likelier to be caught
// in one of many small interleavings than in a few long ones. It caught
// a release that returned capacity in checking order (a pre-check saw
// the tenant's slot back and the trust class's not yet, and answered the
// trust class where no whole state would); the ledger now returns it in
// reverse.
func TestLinearizableShortHistories(t *testing.T) {
	spec := fleetSpec(linFleetPolicy())
	for seed := uint64(1); seed <= 3000; seed++ {
		history := recordFleetHistoryOf(t, seed, 3, 6)
		if porcupine.CheckOperations(spec, history) {
			continue
		}
		sort.Slice(history, func(i, j int) bool { return history[i].Call < history[j].Call })
		for _, op := range history {
			t.Logf("client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, spec.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("history %d is not linearizable", seed)
	}
}
