package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/edge/latentd"
	"latent.dev/admission/linuxtest"
	"latent.dev/admission/node/loadsampler"
)

var stress100k = flag.Bool("stress-100k", false, "run the 100,000-target variant over HTTP (make stress-100k)")

// TestRejectedTargetsOverHTTPKeepResourcesFlat is linuxtest's /proc proof
// over real sockets: in an isolated child, the demonstration latentd (the
// command's own wiring: the wazero backend and the demonstration guest)
// listens on 127.0.0.1:0 and gets 1,000 distinct rejected targets over
// keep-alive and fresh connections, and 100 successful invocations. Once
// the clients have closed their connections, descriptors, sockets,
// children and goroutines are back at the baseline, threads follow
// linuxtest's rule (flat in at least one round), the ledger is at zero
// and the live heap is within heapBound.
func TestRejectedTargetsOverHTTPKeepResourcesFlat(t *testing.T) {
	// Sized for a loaded two-core machine under -race: four workloads of
	// up to 2 minutes and their settling fit in the child's 10 minutes.
	linuxtest.RunIsolated(t, "http-flat-1000", 10*time.Minute, func(t *testing.T) {
		httpKeepsResourcesFlat(t, 1000, 100, 2*time.Minute)
	})
}

// TestRejectedTargetsOverHTTPKeepResourcesFlat100k is the long variant, run
// only when asked: go test -run 100k -args -stress-100k (make stress-100k).
func TestRejectedTargetsOverHTTPKeepResourcesFlat100k(t *testing.T) {
	if !*stress100k {
		t.Skip("run with -args -stress-100k (make stress-100k)")
	}
	linuxtest.RunIsolated(t, "http-flat-100k", 10*time.Minute, func(t *testing.T) {
		httpKeepsResourcesFlat(t, 100_000, 100, 150*time.Second)
	})
}

// heapBound is how much the live heap (HeapAlloc after two collections)
// may grow from the baseline over all rounds, whatever the number of
// targets. Anything kept per target from about 45 bytes up (a path, a
// token, a connection's buffers) passes it within the 3,000 targets of the
// short variant, and anything at all within the 300,000 of the long one;
// the growth measured is 7-35 KiB (net/http's and the runtime's noise),
// for 3,000 and 300,000 targets alike.
const heapBound = 128 << 10

// httpRounds is how often the measured workload runs. Everything but
// threads must be back at the baseline after every round; threads follow
// linuxtest's flat_test.go: the runtime starts threads as timing needs
// and never stops them, so they must be flat in at least one round (a
// workload that started threads of its own would grow them every round).
const httpRounds = 3

// httpWorkers is the number of concurrent clients in a round.
const httpWorkers = 4

// settleWithin bounds how long connections and their goroutines may take
// to wind down after the clients close: seconds on an idle machine, more
// on a loaded one (settle returns as soon as they have).
const settleWithin = time.Minute

// footprint is what must come back: the process's counts (threads apart)
// and the number of goroutines.
type footprint struct {
	counts     linuxtest.Counts
	goroutines int
}

func (f footprint) String() string {
	return fmt.Sprintf("%v goroutines=%d", f.counts, f.goroutines)
}

// keptWorkers counts the goroutines the node keeps by design and that
// takeFootprint leaves out: the scheduler's workers, which grow with the
// concurrency a round happens to reach, up to one per cell, and stay.
var keptWorkers = func() int { return 0 }

func takeFootprint(t *testing.T) footprint {
	t.Helper()
	c, err := linuxtest.Self()
	if err != nil {
		t.Fatal(err)
	}
	return footprint{counts: c, goroutines: runtime.NumGoroutine() - keptWorkers()}
}

// sameButThreads reports whether f and g agree on everything but threads.
func (f footprint) sameButThreads(g footprint) bool {
	f.counts.Threads, g.counts.Threads = 0, 0
	return f == g
}

// steady samples until two samples 20ms apart agree (the load sampler
// opens /proc files for a moment every 500ms) and returns that sample.
func steady(t *testing.T) footprint {
	t.Helper()
	deadline := time.Now().Add(settleWithin)
	prev := takeFootprint(t)
	for {
		time.Sleep(20 * time.Millisecond)
		cur := takeFootprint(t)
		if cur == prev || time.Now().After(deadline) {
			return cur
		}
		prev = cur
	}
}

// settle samples until everything but threads is back at base, or the
// deadline passes; it returns the last sample and how long it took.
func settle(t *testing.T, base footprint) (footprint, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		cur := takeFootprint(t)
		if cur.sameButThreads(base) || time.Since(start) > settleWithin {
			return cur, time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpNode is the demonstration node serving on a loopback port.
type httpNode struct {
	node   *latentd.Node
	base   string
	served chan error
}

// calmLoad is a /proc of an idle machine for the load sampler: on a
// shared machine the real one may say overloaded, and the valid
// invocations would get 503.
var calmLoad = map[string]string{
	"loadavg":         "0.00 0.00 0.00 1/100 1234\n",
	"meminfo":         "MemTotal:        4000000 kB\nMemFree:         3500000 kB\nMemAvailable:    3800000 kB\n",
	"pressure/cpu":    "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
	"pressure/memory": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
}

// startHTTPNode builds the demonstration node as start does (the embedded
// policy, tokens and catalog, the wazero guests holding the
// demonstration guest), except that its load sampler reads calmLoad, and
// serves it on 127.0.0.1:0.
func startHTTPNode(t *testing.T) *httpNode {
	t.Helper()
	dir := t.TempDir()
	for name, content := range calmLoad {
		path := filepath.Join(dir, "proc", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pol, _, err := loadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := loadTokens("")
	if err != nil {
		t.Fatal(err)
	}
	deployments, err := demoDeployments()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	guests, err := latentd.NewWasmGuests(ctx, latentd.WasmConfig{ArtifactsDir: filepath.Join(dir, "artifacts"),
		MaxResponseBytes: 1 << 20, MaxMemoryBytes: pol.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := putDemoGuest(guests); err != nil {
		t.Fatal(err)
	}
	node, err := latentd.New(latentd.Config{Policy: pol, Tokens: tokens, Deployments: deployments, Guests: guests,
		Load: loadsampler.Files{Proc: filepath.Join(dir, "proc")}, ShutdownGrace: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		_ = guests.Close(ctx)
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = node.Shutdown(ctx)
		t.Fatal(err)
	}
	n := &httpNode{node: node, base: "http://" + l.Addr().String(), served: make(chan error, 1)}
	go func() { n.served <- node.Serve(l) }()
	return n
}

func (n *httpNode) stop(t *testing.T) {
	t.Helper()
	if err := n.node.Shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-n.served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("serve: %v", err)
	}
}

// clients are one round's two clients: one that keeps connections alive
// and one that opens a fresh connection for every request.
type clients struct {
	keepAlive, fresh *http.Client
}

func newClients() clients {
	return clients{
		keepAlive: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: httpWorkers}},
		fresh:     &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// pick is the client of request i: every fourth on a fresh connection.
func (c clients) pick(i int) *http.Client {
	if i%4 == 0 {
		return c.fresh
	}
	return c.keepAlive
}

func (c clients) close() {
	c.keepAlive.CloseIdleConnections()
	c.fresh.CloseIdleConnections()
}

// rejectedTarget is the i-th distinct rejected request of a round and the
// status it must get: an unknown token (401), another tenant's path and an
// administrator or another tenant's principal on acme's paths (403), an
// unknown service and an unknown route of acme (404). Every path and every
// unknown token is used once.
func rejectedTarget(prefix string, i int) (path, token string, status int) {
	id := prefix + "-" + strconv.Itoa(i)
	switch i % 6 {
	case 0:
		return "/v1/invoke/acme/svc-" + id + "/greet", "token-" + id, http.StatusUnauthorized
	case 1:
		return "/v1/invoke/tenant-" + id + "/hello/greet", DemoUserToken, http.StatusForbidden
	case 2:
		return "/v1/invoke/acme/svc-" + id + "/greet", DemoAdminToken, http.StatusForbidden
	case 3:
		return "/v1/invoke/acme/svc-" + id + "/greet", "latent-demo-bob", http.StatusForbidden
	case 4:
		return "/v1/invoke/acme/svc-" + id + "/greet", DemoUserToken, http.StatusNotFound
	}
	return "/v1/invoke/acme/hello/route-" + id, DemoUserToken, http.StatusNotFound
}

// send posts body to path with token and returns the status and body.
func send(c *http.Client, url, token, body string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// work sends count distinct rejected targets and completed successful
// invocations with httpWorkers concurrent workers, bounded by count and
// by limit, and returns the statuses it got.
func (n *httpNode) work(t *testing.T, c clients, prefix string, count, completed int, limit time.Duration) map[int]int {
	t.Helper()
	var (
		next     atomic.Int64
		mu       sync.Mutex
		statuses = map[int]int{}
		failures []string
		wg       sync.WaitGroup
	)
	stopAt := time.Now().Add(limit)
	total := count + completed
	for w := 0; w < httpWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				var status int
				var body string
				var err error
				want, wantBody := 0, ""
				if i < count {
					path, token, st := rejectedTarget(prefix, i)
					want = st
					status, _, err = send(c.pick(i), n.base+path, token, "x")
				} else {
					input := prefix + "-ok-" + strconv.Itoa(i)
					want, wantBody = http.StatusOK, "hello, "+input
					status, body, err = send(c.pick(i), n.base+"/v1/invoke/acme/hello/greet", DemoUserToken, input)
				}
				mu.Lock()
				statuses[status]++
				if (err != nil || status != want || (wantBody != "" && body != wantBody)) && len(failures) < 5 {
					failures = append(failures, fmt.Sprintf("request %d: %d %q %v, want %d", i, status, body, err, want))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if sent := min(int(next.Load()), total); sent < total {
		t.Fatalf("%s: only %d of %d requests within %v", prefix, sent, total, limit)
	}
	if len(failures) > 0 {
		t.Fatalf("%s: %v", prefix, failures)
	}
	return statuses
}

// zero checks that every reservation is back and nothing runs.
func (n *httpNode) zero(t *testing.T) {
	t.Helper()
	p := n.node.Provider()
	if live := p.LiveReservations(); live != 0 {
		t.Errorf("%d live reservations", live)
	}
	if r := n.node.Pipeline().Counters().Residue(); len(r) != 0 {
		t.Errorf("pipeline residue %v", r)
	}
	if s := p.NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		t.Errorf("node not at zero: %+v", s)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if s, _ := p.TenantSnapshot(tenant); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			t.Errorf("tenant %s not at zero: %+v", tenant, s)
		}
	}
	if leaked := p.Metrics().Leaked; leaked != 0 {
		t.Errorf("%d permits leaked", leaked)
	}
}

func httpKeepsResourcesFlat(t *testing.T, rejected, completed int, limit time.Duration) {
	n := startHTTPNode(t)
	defer n.stop(t)
	keptWorkers = n.node.Pipeline().Scheduler().Workers
	defer func() { keptWorkers = func() int { return 0 } }()

	// Warm up with the same workload, so that the runtime, the server and
	// the guest runtime hold the threads, pools and compiled code this
	// workload needs before anything is measured.
	c := newClients()
	n.work(t, c, "warm", min(rejected, 2000), completed, limit)
	c.close()
	warmThreads()
	base := steady(t)
	heapBefore, inuseBefore := liveHeap()
	t.Logf("baseline: %v; live heap %d bytes (in use %d)", base, heapBefore, inuseBefore)

	threadsFlat := false
	for round := 0; round < httpRounds; round++ {
		prefix := fmt.Sprintf("round%d", round)
		threadsBefore := takeFootprint(t).counts.Threads
		c := newClients()
		start := time.Now()
		statuses := n.work(t, c, prefix, rejected, completed, limit)
		elapsed := time.Since(start)
		open := takeFootprint(t)
		c.close()
		after, took := settle(t, base)
		t.Logf("round %d: %d rejected targets and %d invocations in %v, statuses %v; with the clients open %v; closed, after %v: %v",
			round, rejected, completed, elapsed.Round(time.Millisecond), statuses, open, took.Round(time.Millisecond), after)
		if statuses[http.StatusOK] != completed || statuses[http.StatusUnauthorized]+statuses[http.StatusForbidden]+statuses[http.StatusNotFound] != rejected {
			t.Fatalf("round %d: statuses %v", round, statuses)
		}
		if !after.sameButThreads(base) {
			t.Errorf("round %d: not back at the baseline within %v: %v, baseline %v", round, settleWithin, after, base)
		}
		if after.counts.Threads <= threadsBefore {
			threadsFlat = true
		}
		n.zero(t)
	}
	if !threadsFlat {
		t.Errorf("threads grew in every one of %d rounds", httpRounds)
	}
	heapAfter, inuseAfter := liveHeap()
	t.Logf("live heap %d -> %d bytes (%+d; in use %d -> %d) over %d rounds of %d targets; bound %d",
		heapBefore, heapAfter, int64(heapAfter)-int64(heapBefore), inuseBefore, inuseAfter, httpRounds, rejected, heapBound)
	if d := int64(heapAfter) - int64(heapBefore); d > heapBound {
		t.Errorf("live heap grew by %d bytes (bound %d)", d, heapBound)
	}
}

// warmThreads has several goroutines sample /proc at once, so that the
// runtime already holds the idle threads the sampling itself would start
// (as linuxtest's flat_test.go does).
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

// liveHeap is HeapAlloc and HeapInuse after two collections.
func liveHeap() (uint64, uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapInuse
}
