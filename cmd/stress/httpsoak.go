package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	edgesoak "latent.dev/admission/edge/soak"
)

// httpWarmUp is the soak -http runs before it takes the baseline, so
// that the runtime has the threads, descriptors (the network poller's)
// and heap the node uses.
var httpWarmUp = edgesoak.Options{Requests: 200, Duration: 2 * time.Second}

// httpReport is what -http saw: the report of edge/soak's Run and the checks
// this command adds around it.
type httpReport struct {
	soak          *edgesoak.Report
	ledger        []string
	leaked        int64
	before, after resources
}

func (r *httpReport) checks() []check {
	s := r.soak
	cs := []check{
		{"every request answered", s.Answered() == s.Sent && s.Errors == 0,
			fmt.Sprintf("sent %d, answered %d, transport errors %d", s.Sent, s.Answered(), s.Errors)},
		{"ledger back to zero", len(r.ledger) == 0, fmt.Sprint(r.ledger)},
		{"no permit leaked (none is abandoned over HTTP)", r.leaked == 0, fmt.Sprintf("leaked %d", r.leaked)},
		{"the node's invariants (edge/soak)", len(s.Violations) == 0, fmt.Sprint(s.Violations)},
	}
	return append(cs, resourceChecks(r.before, r.after)...)
}

func (r *httpReport) ok() bool {
	for _, c := range r.checks() {
		if !c.ok {
			return false
		}
	}
	return true
}

func (r *httpReport) print(w io.Writer) {
	fmt.Fprintln(w, "\nhttp soak: an in-process latentd (the demonstration) over loopback")
	r.soak.WriteStatuses(w)
	printResources(w, r.before, r.after)
	printChecks(w, r.checks())
}

// soakHTTP runs edge/soak's Run, the code `latentd soak` runs, bounded by
// cfg.requests and cfg.duration with cfg.workers clients, and checks
// this process's resources around it.
func soakHTTP(ctx context.Context, cfg config) (*httpReport, error) {
	warm := httpWarmUp
	warm.Concurrency = cfg.workers
	if _, err := edgesoak.Run(ctx, warm); err != nil {
		return nil, err
	}
	runtime.GC()
	r := &httpReport{before: sampleResources()}
	var err error
	r.soak, err = edgesoak.Run(ctx, edgesoak.Options{Requests: cfg.requests, Duration: cfg.duration, Concurrency: cfg.workers})
	if err != nil {
		return nil, err
	}
	r.ledger = ledgerProblems(r.soak.Provider)
	r.leaked = r.soak.Provider.Metrics().Leaked
	runtime.GC()
	r.after = sampleResources()
	return r, nil
}

func runHTTP(cfg config, stdout, stderr io.Writer) int {
	r, err := soakHTTP(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(stderr, "stress: -http: %v\n", err)
		return 2
	}
	r.print(stdout)
	if !r.ok() {
		return 1
	}
	return 0
}
