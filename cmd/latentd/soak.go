package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

// soakOptions bound the soak by count and by time.
type soakOptions struct {
	requests    int
	duration    time.Duration
	concurrency int
}

// soakMain runs `latentd soak`: an in-process demonstration node on a
// loopback port and a bounded request loop against it (valid
// invocations, distinct rejected targets, oversized payloads), then the
// node's invariants: every reservation back, nothing queued or running.
func soakMain(args []string, stdout, stderr io.Writer) int {
	var so soakOptions
	fs := flag.NewFlagSet("latentd soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&so.requests, "requests", 2000, "stop after this many requests")
	fs.DurationVar(&so.duration, "duration", 30*time.Second, "stop after this long")
	fs.IntVar(&so.concurrency, "concurrency", 8, "concurrent clients")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if so.requests <= 0 || so.duration <= 0 || so.concurrency <= 0 {
		fmt.Fprintln(stderr, "latentd soak: -requests, -duration and -concurrency must be positive")
		return 2
	}
	report, err := soak(context.Background(), so)
	if err != nil {
		fmt.Fprintln(stderr, "latentd soak:", err)
		return 1
	}
	fmt.Fprint(stdout, report.String())
	if len(report.violations) > 0 {
		return 1
	}
	return 0
}

// soakReport is what one soak saw.
type soakReport struct {
	sent       int
	elapsed    time.Duration
	statuses   map[int]int
	latencies  []time.Duration
	errors     int
	violations []string
	goroutines [2]int
}

func (r *soakReport) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "soak: %d requests in %v (%.0f/s), %d transport errors\n", r.sent, r.elapsed.Round(time.Millisecond),
		float64(r.sent)/r.elapsed.Seconds(), r.errors)
	codes := make([]int, 0, len(r.statuses))
	for c := range r.statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, "  %d %-24s %d\n", c, http.StatusText(c), r.statuses[c])
	}
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	pct := func(p float64) time.Duration {
		if len(r.latencies) == 0 {
			return 0
		}
		return r.latencies[int(p*float64(len(r.latencies)-1))]
	}
	fmt.Fprintf(&b, "latency: p50 %v p90 %v p99 %v max %v\n", pct(0.5), pct(0.9), pct(0.99), pct(1))
	fmt.Fprintf(&b, "goroutines: %d before, %d after\n", r.goroutines[0], r.goroutines[1])
	if len(r.violations) == 0 {
		fmt.Fprintln(&b, "invariants: every reservation returned, nothing queued or running, no leaked permit")
	}
	for _, v := range r.violations {
		fmt.Fprintln(&b, "VIOLATION:", v)
	}
	return b.String()
}

// soakRequest is the i-th request of the mix.
func soakRequest(base string, i int) (*http.Request, error) {
	path, token, body := "/v1/invoke/acme/hello/greet", DemoUserToken, []byte("soak")
	switch i % 10 {
	case 1, 2: // another tenant's path, distinct each time: 403
		path = "/v1/invoke/tenant-" + strconv.Itoa(i) + "/svc/route"
	case 3: // a route that does not exist, distinct each time: 404
		path = "/v1/invoke/acme/hello/route-" + strconv.Itoa(i)
	case 4: // no token: 401
		token = ""
	case 5: // over the payload maximum: 413
		body = bytes.Repeat([]byte("x"), 64<<10+1)
	}
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

func soak(ctx context.Context, so soakOptions) (*soakReport, error) {
	r := &soakReport{statuses: map[int]int{}}
	r.goroutines[0] = runtime.NumGoroutine()
	o := options{listen: "127.0.0.1:0", grace: 5 * time.Second, maxResponseBytes: 1 << 20}
	s, err := start(ctx, o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, err
	}
	defer s.cleanup()
	served := make(chan error, 1)
	go func() { served <- s.node.Serve(s.listener) }()
	base := "http://" + s.listener.Addr().String()
	transport := &http.Transport{MaxIdleConnsPerHost: so.concurrency}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	var mu sync.Mutex
	next := 0
	stopAt := time.Now().Add(so.duration)
	begin := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < so.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				if i >= so.requests || time.Now().After(stopAt) {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				req, err := soakRequest(base, i)
				if err != nil {
					mu.Lock()
					r.errors++
					mu.Unlock()
					continue
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					r.errors++
				} else {
					r.statuses[status]++
					r.latencies = append(r.latencies, took)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(begin)
	r.sent = next
	transport.CloseIdleConnections()

	residue := s.node.Pipeline().Counters().Residue()
	if err := s.node.Shutdown(ctx); err != nil {
		r.violations = append(r.violations, err.Error())
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		r.violations = append(r.violations, "serve: "+err.Error())
	}
	r.violations = append(r.violations, residue...)
	if live := s.node.Provider().LiveReservations(); live != 0 {
		r.violations = append(r.violations, fmt.Sprintf("%d reservations live", live))
	}
	if leaked := s.node.Provider().Metrics().Leaked; leaked != 0 {
		r.violations = append(r.violations, fmt.Sprintf("%d permits leaked", leaked))
	}
	// Goroutines wind down a moment after their connections close.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > r.goroutines[0] && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.goroutines[1] = runtime.NumGoroutine()
	if r.goroutines[1] > r.goroutines[0] {
		r.violations = append(r.violations, fmt.Sprintf("goroutines: %d after, %d before", r.goroutines[1], r.goroutines[0]))
	}
	return r, nil
}
