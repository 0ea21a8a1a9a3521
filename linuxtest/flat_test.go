package linuxtest_test

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/linuxtest"
	"latent.dev/admission/policy"
)

var stress100k = flag.Bool("stress-100k", false, "run the 100,000-target variant (make stress-100k)")

// TestRejectedTargetsKeepResourcesFlat: 1,000 distinct rejected service
// targets and 100 completed reservations leave thread, descriptor, socket
// and child counts unchanged, every tenant counter at zero, and the heap
// within a small fixed bound.
func TestRejectedTargetsKeepResourcesFlat(t *testing.T) {
	linuxtest.RunIsolated(t, "flat-1000", 5*time.Minute, func(t *testing.T) { // a loaded machine under -race
		keepsResourcesFlat(t, 1000, 100)
	})
}

// TestRejectedTargetsKeepResourcesFlat100k is the long variant, run only
// when asked: go test ./linuxtest -run 100k -args -stress-100k.
func TestRejectedTargetsKeepResourcesFlat100k(t *testing.T) {
	if !*stress100k {
		t.Skip("run with -args -stress-100k (make stress-100k)")
	}
	linuxtest.RunIsolated(t, "flat-100k", 10*time.Minute, func(t *testing.T) {
		keepsResourcesFlat(t, 100_000, 100)
	})
}

// heapBound is how much the live heap may differ after the work; the
// rejections alone would need far more if anything were retained per
// target (each target carries about 200 bytes of names).
const heapBound = 256 << 10

// rounds is how often the measured workload runs. Descriptors, sockets
// and children must be unchanged after every round. The OS thread count is
// the Go runtime's: it starts a thread when a blocking read hands its P
// over or the collector needs one, depending on timing, and never stops
// it. So threads must come back flat in at least one round: a workload
// that started threads of its own would grow them every round.
const rounds = 3

func keepsResourcesFlat(t *testing.T, rejectedTargets, completed int) {
	node := setUp(t)
	// Warm up with the same workload first, so that the runtime holds the
	// threads and pools this workload needs before anything is measured.
	node.cycle(t, "warm", completed)
	node.rejectTargets(t, "warm", min(rejectedTargets, 20_000))
	warmThreads()
	_ = liveHeap()

	heapBefore := liveHeap()
	threadsFlat := false
	for round := 0; round < rounds; round++ {
		before, err := linuxtest.Self()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		prefix := fmt.Sprintf("round%d", round)
		reasons := node.rejectTargets(t, prefix, rejectedTargets)
		node.cycle(t, prefix+"-done", completed)
		elapsed := time.Since(start)
		after, err := linuxtest.Self()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d rejected targets %v and %d completed reservations in %v; before %v, after %v",
			round, rejectedTargets, reasons, completed, elapsed, before, after)
		if reasons[core.ReasonRevisionNotAvailable]+reasons[core.ReasonPrincipalNotAuthorized] != rejectedTargets {
			t.Fatalf("unexpected reasons %v", reasons)
		}
		gained := after.Sub(before)
		if gained.Threads == 0 {
			threadsFlat = true
		}
		gained.Threads = 0
		if gained != (linuxtest.Counts{}) {
			t.Errorf("round %d: process resources changed: %v", round, gained)
		}
		node.zero(t)
	}
	if !threadsFlat {
		t.Errorf("threads grew in every one of %d rounds", rounds)
	}
	heapAfter := liveHeap()
	t.Logf("live heap %d -> %d bytes over %d rounds", heapBefore, heapAfter, rounds)
	if d := int64(heapAfter) - int64(heapBefore); d > heapBound {
		t.Errorf("live heap grew by %d bytes (bound %d)", d, heapBound)
	}
}

type node struct {
	provider *core.LocalQuotaProvider
	ctl      *core.AdmissionController
	rev      policy.ResolvedRevision
}

func setUp(t *testing.T) *node {
	t.Helper()
	data, err := os.ReadFile("../testdata/policy/node.json")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.DecodePolicy(data)
	if err != nil {
		t.Fatal(err)
	}
	pol.Node.Overload.MaximumObservationAge = time.Hour
	provider, err := core.NewLocalQuotaProvider(pol)
	if err != nil {
		t.Fatal(err)
	}
	catData, err := os.ReadFile("../testdata/catalog/good.json")
	if err != nil {
		t.Fatal(err)
	}
	file, err := catalog.DecodeCatalogFile(catData, true)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.FromFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pin := cat.Pin()
	rev, _, err := pin.Resolve(catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}, "key")
	if err != nil {
		t.Fatal(err)
	}
	load := core.NewNodeLoadState(time.Minute, nil)
	if err := load.Publish(core.LoadSample{Sequence: 1, ObservedAt: time.Now(), CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
		t.Fatal(err)
	}
	return &node{provider: provider, ctl: provider.Controller(core.ControllerConfig{Source: pin, Load: load}), rev: *rev}
}

func (n *node) request(id string) *core.AdmissionRequest {
	return &core.AdmissionRequest{
		ActivationID:    id,
		Principal:       core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		Revision:        n.rev,
		RequestedBudget: policy.Budget{CPUFuel: 1_000_000, MemoryBytes: 8 << 20},
		PayloadBytes:    100,
		Priority:        3,
	}
}

// rejectTargets sends count requests for distinct service targets that
// nothing resolves to (a quarter from unknown tenants) and counts the
// rejections by reason.
func (n *node) rejectTargets(t *testing.T, prefix string, count int) map[core.Reason]int {
	t.Helper()
	reasons := map[core.Reason]int{}
	for i := 0; i < count; i++ {
		req := n.request(fmt.Sprintf("%s-%d", prefix, i))
		// A distinct service target each time, resolved by nobody: a
		// forged tuple that the pin must refuse without keeping anything.
		req.Revision.Service = fmt.Sprintf("svc-%s-%d", prefix, i)
		req.Revision.Revision = fmt.Sprintf("rev-%064x", i)
		if i%4 == 1 { // and unknown tenants, which must not get counters
			req.Principal.Tenant = fmt.Sprintf("tenant-%d", i)
			req.Revision.Tenant = req.Principal.Tenant
		}
		_, err := n.ctl.Admit(req)
		e, ok := err.(core.Error)
		if !ok {
			t.Fatalf("target %d: got %v", i, err)
		}
		reasons[e.Reason()]++
	}
	return reasons
}

// cycle completes count reservations: admit, start, release.
func (n *node) cycle(t *testing.T, prefix string, count int) {
	t.Helper()
	for i := 0; i < count; i++ {
		p, err := n.ctl.Admit(n.request(fmt.Sprintf("%s-%d", prefix, i)))
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.StartExecution()
		if err != nil {
			t.Fatal(err)
		}
		if !e.Release() {
			t.Fatal("release returned nothing")
		}
	}
}

func (n *node) zero(t *testing.T) {
	t.Helper()
	c := n.provider.Policy()
	for i := 0; i < c.NumTenants(); i++ {
		name := c.Tenant(policy.TenantID(i)).Name
		s, _ := n.provider.TenantSnapshot(name)
		if s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			t.Errorf("tenant %s not at zero: %+v", name, s)
		}
	}
	if s := n.provider.NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		t.Errorf("node not at zero: %+v", s)
	}
	if live := n.provider.LiveReservations(); live != 0 {
		t.Errorf("%d live reservations", live)
	}
}

// warmThreads has several goroutines sample /proc at once, so that the
// runtime already holds the idle OS threads that the measuring itself
// (blocking reads handing their P to another thread) would otherwise
// start between the two samples.
func warmThreads() {
	var wg sync.WaitGroup
	for g := 0; g < 4*runtime.GOMAXPROCS(0); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				_, _ = linuxtest.Self()
			}
		}()
	}
	wg.Wait()
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
