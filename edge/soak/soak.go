package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/edge/latentd"
	"latent.dev/admission/edge/latentd/demo"
)

// Options bound a soak by count and by time.
type Options struct {
	// Requests: the loop stops after this many requests. Required.
	Requests int
	// Duration: the loop stops after this long. Required.
	Duration time.Duration
	// Concurrency is the number of concurrent clients. Required.
	Concurrency int
	// Logger receives the node's log lines; nil discards them.
	Logger *slog.Logger
}

// Report is what one soak saw.
type Report struct {
	// Sent is the number of requests sent; each one either got a status
	// (Statuses) or a transport error (Errors).
	Sent    int
	Elapsed time.Duration
	// Statuses counts the answers by HTTP status.
	Statuses map[int]int
	// Latencies are the answered requests' round trips, sorted.
	Latencies []time.Duration
	// Errors counts the requests that got no answer.
	Errors int
	// Violations are the node's invariants that failed: reservations
	// left, something queued or running, a leaked permit, a shutdown or
	// serve error, goroutines that did not wind down. Empty: all held.
	Violations []string
	// Goroutines are the process's goroutines before the node started and
	// after it stopped.
	Goroutines [2]int
	// Provider is the node's quota provider, after shutdown, for callers
	// that check more of its counters.
	Provider *core.LocalQuotaProvider
}

// Percentile is the round trip at quantile p in [0, 1] of the answered
// requests (0 when none was answered).
func (r *Report) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[int(p*float64(len(r.Latencies)-1))]
}

// Answered is the number of requests that got a status.
func (r *Report) Answered() int {
	n := 0
	for _, c := range r.Statuses {
		n += c
	}
	return n
}

// WriteStatuses writes the request count, the status counts and the
// latency percentiles, one item a line.
func (r *Report) WriteStatuses(w io.Writer) {
	fmt.Fprintf(w, "soak: %d requests in %v (%.0f/s), %d transport errors\n", r.Sent, r.Elapsed.Round(time.Millisecond),
		float64(r.Sent)/r.Elapsed.Seconds(), r.Errors)
	codes := make([]int, 0, len(r.Statuses))
	for c := range r.Statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		fmt.Fprintf(w, "  %d %-24s %d\n", c, http.StatusText(c), r.Statuses[c])
	}
	fmt.Fprintf(w, "latency: p50 %v p90 %v p99 %v max %v\n", r.Percentile(0.5), r.Percentile(0.9), r.Percentile(0.99), r.Percentile(1))
}

func (r *Report) String() string {
	var b bytes.Buffer
	r.WriteStatuses(&b)
	fmt.Fprintf(&b, "goroutines: %d before, %d after\n", r.Goroutines[0], r.Goroutines[1])
	if len(r.Violations) == 0 {
		fmt.Fprintln(&b, "invariants: every reservation returned, nothing queued or running, no leaked permit")
	}
	for _, v := range r.Violations {
		fmt.Fprintln(&b, "VIOLATION:", v)
	}
	return b.String()
}

// request is the i-th request of the mix: valid invocations, distinct
// other-tenant paths (403), distinct unknown routes (404), no token (401)
// and payloads over the maximum (413).
func request(base string, i int) (*http.Request, error) {
	path, token, body := "/v1/invoke/acme/hello/greet", demo.UserToken, []byte("soak")
	switch i % 10 {
	case 1, 2:
		path = "/v1/invoke/tenant-" + strconv.Itoa(i) + "/svc/route"
	case 3:
		path = "/v1/invoke/acme/hello/route-" + strconv.Itoa(i)
	case 4:
		token = ""
	case 5:
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

// demoNode is the demonstration node (edge/latentd/demo) on a loopback
// port, not serving yet, and the artifact directory to remove after it.
func demoNode(ctx context.Context, logger *slog.Logger) (*latentd.Node, net.Listener, string, error) {
	pol, err := demo.Policy()
	if err != nil {
		return nil, nil, "", err
	}
	tokens, err := latentd.DecodeTokens(demo.TokensJSON())
	if err != nil {
		return nil, nil, "", err
	}
	deployments, err := demo.Deployments()
	if err != nil {
		return nil, nil, "", err
	}
	dir, err := os.MkdirTemp("", "latentd-soak-")
	if err != nil {
		return nil, nil, "", err
	}
	fail := func(err error) (*latentd.Node, net.Listener, string, error) {
		_ = os.RemoveAll(dir)
		return nil, nil, "", err
	}
	guests, err := latentd.NewWasmGuests(ctx, latentd.WasmConfig{ArtifactsDir: dir, MaxResponseBytes: 1 << 20, MaxMemoryBytes: pol.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		return fail(err)
	}
	if err := guests.PutArtifact(demo.GuestDigest(), bytes.NewReader(demo.Guest())); err != nil {
		_ = guests.Close(ctx)
		return fail(err)
	}
	n, err := latentd.New(latentd.Config{Policy: pol, Tokens: tokens, Guests: guests, Deployments: deployments, ShutdownGrace: 5 * time.Second, Logger: logger})
	if err != nil {
		_ = guests.Close(ctx)
		return fail(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = n.Shutdown(ctx)
		return fail(err)
	}
	return n, l, dir, nil
}

// Run runs the demonstration node (edge/latentd/demo) in this process on
// a loopback port and a bounded request loop against it: opts.Concurrency
// clients send the mix of valid invocations and distinct rejected
// targets until opts.Requests were sent or opts.Duration passed. Then it
// shuts the node down and checks its invariants: every reservation back,
// nothing queued or running, no leaked permit, the goroutines back at
// their count before. An error means the soak could not run; failed
// invariants are in the report's Violations. `latentd soak` and
// `cmd/stress -http` both run it.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Requests <= 0 || opts.Duration <= 0 || opts.Concurrency <= 0 {
		return nil, errors.New("soak: a soak's requests, duration and concurrency must be positive")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Report{Statuses: map[int]int{}}
	r.Goroutines[0] = runtime.NumGoroutine()
	node, listener, dir, err := demoNode(ctx, logger)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	r.Provider = node.Provider()
	served := make(chan error, 1)
	go func() { served <- node.Serve(listener) }()
	base := "http://" + listener.Addr().String()
	transport := &http.Transport{MaxIdleConnsPerHost: opts.Concurrency}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	var mu sync.Mutex
	next := 0
	stopAt := time.Now().Add(opts.Duration)
	begin := time.Now()
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				if i >= opts.Requests || time.Now().After(stopAt) || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				req, err := request(base, i)
				if err != nil {
					mu.Lock()
					r.Errors++
					mu.Unlock()
					continue
				}
				t0 := time.Now()
				resp, err := client.Do(req.WithContext(ctx))
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					r.Errors++
				} else {
					r.Statuses[status]++
					r.Latencies = append(r.Latencies, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(begin)
	r.Sent = next
	slices.Sort(r.Latencies)
	transport.CloseIdleConnections()

	// The last answer can reach its client a moment before the scheduler
	// has counted its activation finished (a loaded machine stretches the
	// moment): the counters must settle, within settle.
	residue := node.Pipeline().Counters().Residue()
	for deadline := time.Now().Add(settle); len(residue) != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		residue = node.Pipeline().Counters().Residue()
	}
	if err := node.Shutdown(context.WithoutCancel(ctx)); err != nil {
		r.Violations = append(r.Violations, err.Error())
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		r.Violations = append(r.Violations, "serve: "+err.Error())
	}
	r.Violations = append(r.Violations, residue...)
	if live := r.Provider.LiveReservations(); live != 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d reservations live", live))
	}
	if leaked := r.Provider.Metrics().Leaked; leaked != 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d permits leaked", leaked))
	}
	// Goroutines wind down a moment after their connections close.
	deadline := time.Now().Add(settle)
	for runtime.NumGoroutine() > r.Goroutines[0] && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	r.Goroutines[1] = runtime.NumGoroutine()
	if r.Goroutines[1] > r.Goroutines[0] {
		r.Violations = append(r.Violations, fmt.Sprintf("goroutines: %d after, %d before", r.Goroutines[1], r.Goroutines[0]))
	}
	return r, nil
}

// settle bounds how long Run waits, after the last answer, for the
// node's counters and goroutines to come back: a moment on an idle
// machine, seconds on a loaded one; it waits no longer than they take.
const settle = time.Minute
