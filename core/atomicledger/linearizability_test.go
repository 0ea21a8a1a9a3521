package atomicledger

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"latent.dev/admission/policy"
)

// This file checks the ledger alone against a sequential specification
// with porcupine (core/linearizability_test.go checks the whole
// controller). The commit is core's step 13 without the clock:
// duplicate, capacity, then a feasibility refusal when the cell class's
// backlog is at or above linBacklog.

const (
	linClients = 5
	linOps     = 40 // per client
	linKeys    = 6  // activation IDs per tenant
	linBacklog = 3  // per cell class; there are two
)

func linPolicy() *policy.NodeAdmissionPolicy {
	p := limitsPolicy()
	p.Node.Limits = policy.Limits{MaxLiveActivations: 6, MaxQueuedReservations: 5, MaxReservedCPUFuel: 10, MaxReservedMemoryBytes: 9}
	small := policy.Limits{MaxLiveActivations: 4, MaxQueuedReservations: 4, MaxReservedCPUFuel: 7, MaxReservedMemoryBytes: 6}
	for i := range p.Tenants {
		p.Tenants[i].Limits = small
	}
	for i := range p.TrustClasses {
		p.TrustClasses[i].Limits = small
	}
	p.QueueClasses[0].MaxQueued, p.QueueClasses[1].MaxQueued = 3, 3
	return p
}

type linKind uint8

const (
	linCommit linKind = iota
	linStart
	linRelease
)

type linInput struct {
	kind   linKind
	commit int // the commit's operation number (for start and release: the one they name)
	key    int
	r      Reservation
}

// linLive is one live reservation in the specification.
type linLive struct {
	commit    int
	key       int
	r         Reservation
	executing bool
}

type linState []linLive // sorted by commit

// step is the sequential ledger: what in answers in state s, and the
// state after it.
func (s linState) step(l *Ledger, in linInput) (string, linState) {
	find := func(commit int) int {
		for i, e := range s {
			if e.commit == commit {
				return i
			}
		}
		return -1
	}
	switch in.kind {
	case linStart:
		i := find(in.commit)
		if i < 0 || s[i].executing {
			return "false", s
		}
		next := append(linState(nil), s...)
		next[i].executing = true
		return "true", next
	case linRelease:
		i := find(in.commit)
		if i < 0 {
			return "false", s
		}
		return "true", append(append(linState(nil), s[:i]...), s[i+1:]...)
	}
	for _, e := range s {
		if e.key == in.key && e.r.Tenant == in.r.Tenant {
			return "duplicate", s
		}
	}
	if short := specShortfall(l, s, in.r); short != "" {
		return short, s
	}
	backlog := 0
	for _, e := range s {
		if e.r.CellClass == in.r.CellClass {
			backlog++
		}
	}
	if backlog >= linBacklog {
		return "infeasible", s
	}
	next := append(linState(nil), s...)
	next = append(next, linLive{commit: in.commit, key: in.key, r: in.r})
	sort.Slice(next, func(i, j int) bool { return next[i].commit < next[j].commit })
	return "ok", next
}

func linModel(l *Ledger) porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return linState(nil) },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			want, next := state.(linState).step(l, input.(linInput))
			return want == output.(string), next
		},
		Equal: func(a, b interface{}) bool {
			x, y := a.(linState), b.(linState)
			return len(x) == len(y) && (len(x) == 0 || reflect.DeepEqual(x, y))
		},
		DescribeOperation: func(input, output interface{}) string {
			in := input.(linInput)
			return fmt.Sprintf("%d(commit %d key %d %+v) -> %s", in.kind, in.commit, in.key, in.r, output)
		},
	}
}

// recordLedgerHistory runs linClients goroutines against a fresh ledger.
func recordLedgerHistory(t *testing.T, l *Ledger, seed uint64) []porcupine.Operation {
	var (
		clock, nextOp atomic.Int64
		mu            sync.Mutex
		history       []porcupine.Operation
		left          []Ticket
		wg            sync.WaitGroup
		start         = make(chan struct{})
	)
	for client := range linClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(client)))
			tickets := map[int]Ticket{}
			var mine []int
			var ops []porcupine.Operation
			<-start
			for range linOps {
				if rng.IntN(2) == 0 {
					runtime.Gosched()
				}
				in := linInput{commit: int(nextOp.Add(1))}
				var out string
				var call, ret int64
				if r := rng.IntN(10); r < 4 || len(mine) == 0 {
					in.kind, in.key = linCommit, rng.IntN(linKeys)
					in.r = Reservation{Tenant: policy.TenantID(rng.IntN(2)), TrustClass: policy.TrustClassID(rng.IntN(2)),
						QueueClass: policy.QueueClassID(rng.IntN(2)), CellClass: policy.CellClass(rng.IntN(2)),
						CPUFuel: 1 + rng.Uint64N(2), MemoryBytes: 1 + rng.Uint64N(2)}
					call = clock.Add(1)
					tk, answer := commit(l, fmt.Sprint(in.key), in.r, linBacklog)
					ret = clock.Add(1)
					out = answer
					if answer == "ok" {
						tickets[in.commit] = tk
						mine = append(mine, in.commit)
					}
				} else {
					j := rng.IntN(len(mine))
					in.commit = mine[j]
					tk := tickets[in.commit]
					var ok bool
					in.kind = linRelease
					if r < 7 {
						in.kind = linStart
					} else if rng.IntN(4) != 0 {
						// Mostly forget a released ticket; the rest stay
						// to be used again, and get false.
						mine = append(mine[:j], mine[j+1:]...)
					}
					call = clock.Add(1)
					l.Update(func(tx Tx) {
						if in.kind == linStart {
							ok = tx.Start(tk)
						} else {
							ok = tx.Release(tk)
						}
					})
					ret = clock.Add(1)
					out = fmt.Sprint(ok)
				}
				ops = append(ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
			}
			mu.Lock()
			history = append(history, ops...)
			for _, tk := range tickets {
				left = append(left, tk)
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	// What the clients still hold is released once the history is over.
	for _, tk := range left {
		release(l, tk)
	}
	return history
}

// Histories of racing commits, starts and releases, driven to the
// ledger's limits, are linearizable against the sequential
// specification; every kind of answer happens.
func TestLedgerIsLinearizable(t *testing.T) {
	outcomes := map[string]int{}
	for h := range 60 {
		l := New(policy.MustCompile(linPolicy()))
		history := recordLedgerHistory(t, l, uint64(h)+1)
		for _, op := range history {
			outcomes[fmt.Sprint(op.Input.(linInput).kind, " ", op.Output)]++
		}
		model := linModel(l)
		result, info := porcupine.CheckOperationsVerbose(model, history, 10*time.Second)
		switch result {
		case porcupine.Illegal:
			for _, partial := range info.PartialLinearizationsOperations() {
				for _, linearization := range partial {
					for _, op := range linearization {
						t.Logf("  %s", model.DescribeOperation(op.Input, op.Output))
					}
					break
				}
			}
			t.Fatalf("history %d is not linearizable (longest linearizable prefix above)", h)
		case porcupine.Unknown:
			t.Fatalf("history %d: the checker timed out", h)
		}
		if n := l.LiveEntries(); n != 0 {
			t.Fatalf("history %d: %d entries live at the end", h, n)
		}
	}
	for _, want := range []string{"0 ok", "0 duplicate", "0 infeasible", "1 true", "1 false", "2 true", "2 false"} {
		if outcomes[want] == 0 {
			t.Errorf("no %q in the histories: %v", want, outcomes)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// specShortfall is the specification's capacity check: what the live
// reservations of s hold at each of r's scopes, against that scope's
// limits, in checking order; "" when r fits.
func specShortfall(l *Ledger, s linState, r Reservation) string {
	scopes := []struct {
		scope Scope
		same  func(e Reservation) bool
		limit policy.Limits
	}{
		{NodeScope, func(Reservation) bool { return true }, l.node.limit},
		{TenantScope, func(e Reservation) bool { return e.Tenant == r.Tenant }, l.tenant[r.Tenant].limit},
		{TrustClassScope, func(e Reservation) bool { return e.TrustClass == r.TrustClass }, l.trust[r.TrustClass].limit},
	}
	for _, sc := range scopes {
		var used Held
		for _, e := range s {
			if sc.same(e.r) {
				used.Live++
				if !e.executing {
					used.Queued++
				}
				used.CPUFuel += e.r.CPUFuel
				used.MemoryBytes += e.r.MemoryBytes
			}
		}
		lim := sc.limit
		for d, ok := range []bool{
			used.Live+1 <= lim.MaxLiveActivations, used.Queued+1 <= lim.MaxQueuedReservations,
			used.CPUFuel+r.CPUFuel <= lim.MaxReservedCPUFuel, used.MemoryBytes+r.MemoryBytes <= lim.MaxReservedMemoryBytes,
		} {
			if !ok {
				return fmt.Sprintf("short %d/%d", sc.scope, d)
			}
		}
	}
	var queued uint64
	for _, e := range s {
		if e.r.QueueClass == r.QueueClass && !e.executing {
			queued++
		}
	}
	if queued+1 > l.queue[r.QueueClass].limit.MaxQueuedReservations {
		return fmt.Sprintf("short %d/%d", QueueClassScope, QueuedReservations)
	}
	return ""
}
