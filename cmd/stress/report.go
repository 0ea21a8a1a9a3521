package main

import (
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sort"
	"time"

	"latent.dev/admission/core"
)

// histogram is a log-linear latency histogram: 8 buckets per power of
// two of nanoseconds, so a percentile is within 12.5% of the truth.
type histogram struct {
	counts [64 * 8]uint64
	total  uint64
}

func (h *histogram) record(d time.Duration) {
	ns := uint64(max(d, 1))
	exp := bits.Len64(ns) - 1
	sub := uint64(0)
	if exp >= 3 {
		sub = (ns >> (exp - 3)) & 7
	}
	h.counts[exp*8+int(sub)]++
	h.total++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen > rank {
			exp, sub := i/8, uint64(i%8)
			if exp < 3 {
				return time.Duration(uint64(1) << (exp + 1))
			}
			return time.Duration((8 + sub + 1) << (exp - 3))
		}
	}
	return 0
}

type report struct {
	seed      uint64
	workers   int
	duration  time.Duration
	elapsed   time.Duration
	admitted  int64
	rejected  int64
	abandoned int64
	reclaimed int64
	peakLive  uint64
	latency   histogram
	metrics   core.Metrics
	ledger    []string
	before    resources
	after     resources
	seconds   []second    // the progress lines' counts, for -report
	limits    []liveLimit // what the peak of live reservations is held against
}

// second is one progress line: the admissions and rejections in that
// second and the node's live reservations at its end.
type second struct {
	tick               int
	admitted, rejected int64
	live               uint64
}

// checks are the invariants, each with whether it held.
func (r *report) checks() []check {
	var cs []check
	cs = append(cs, check{"ledger back to zero", len(r.ledger) == 0, fmt.Sprint(r.ledger)})
	cs = append(cs, check{"every abandoned permit reclaimed, no other leak", r.reclaimed == r.abandoned,
		fmt.Sprintf("abandoned %d, reclaimed %d", r.abandoned, r.reclaimed)})
	cs = append(cs, check{"admissions counted once", r.metrics.Admitted == r.admitted,
		fmt.Sprintf("library %d, workers %d", r.metrics.Admitted, r.admitted)})
	return append(cs, resourceChecks(r.before, r.after)...)
}

// resourceChecks are the invariants on this process's resources: no
// growth from before to after.
func resourceChecks(before, after resources) []check {
	cs := []check{{"goroutines did not grow", after.goroutines <= before.goroutines,
		fmt.Sprintf("%d -> %d", before.goroutines, after.goroutines)}}
	if before.countsErr == nil && after.countsErr == nil {
		b, a := before.counts, after.counts
		cs = append(cs,
			check{"descriptors did not grow", a.Descriptors <= b.Descriptors, fmt.Sprintf("%d -> %d", b.Descriptors, a.Descriptors)},
			check{"sockets did not grow", a.Sockets <= b.Sockets, fmt.Sprintf("%d -> %d", b.Sockets, a.Sockets)},
			check{"child processes did not grow", a.Children <= b.Children, fmt.Sprintf("%d -> %d", b.Children, a.Children)},
			// The Go runtime adds an OS thread when one blocks (the final
			// collections and finalizers can do that) and never removes
			// it; admission itself starts none. Growth beyond GOMAXPROCS
			// would be ours.
			check{"threads did not grow beyond the runtime's slack", a.Threads <= b.Threads+runtime.GOMAXPROCS(0),
				fmt.Sprintf("%d -> %d, slack %d", b.Threads, a.Threads, runtime.GOMAXPROCS(0))},
		)
	}
	return cs
}

type check struct {
	name   string
	ok     bool
	detail string
}

func (r *report) ok() bool {
	for _, c := range r.checks() {
		if !c.ok {
			return false
		}
	}
	return true
}

func (r *report) print(w io.Writer) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "\nsoak: %s with %d workers, seed %d\n", r.elapsed.Round(time.Millisecond), r.workers, r.seed)
	fmt.Fprintf(w, "admitted   %d (%.0f/s)\nrejected   %d (%.0f/s)\n", r.admitted, float64(r.admitted)/secs, r.rejected, float64(r.rejected)/secs)
	fmt.Fprintf(w, "rejections by reason (library counters):\n")
	byReason := r.metrics.RejectedByReason()
	reasons := make([]string, 0, len(byReason))
	for reason := range byReason {
		reasons = append(reasons, string(reason))
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		fmt.Fprintf(w, "  %-34s %d\n", reason, byReason[core.Reason(reason)])
	}
	fmt.Fprintf(w, "admit latency p50 %v  p99 %v  p99.9 %v  (%d samples)\n",
		r.latency.quantile(0.5), r.latency.quantile(0.99), r.latency.quantile(0.999), r.latency.total)
	fmt.Fprintf(w, "peak live reservations %d\n", r.peakLive)
	fmt.Fprintf(w, "abandoned permits %d, reclaimed by the GC %d\n", r.abandoned, r.reclaimed)
	printResources(w, r.before, r.after)
	printChecks(w, r.checks())
}

// printResources writes the resource counts before and after.
func printResources(w io.Writer, before, after resources) {
	fmt.Fprintf(w, "goroutines %d -> %d", before.goroutines, after.goroutines)
	if before.countsErr == nil && after.countsErr == nil {
		b, a := before.counts, after.counts
		fmt.Fprintf(w, ", threads %d -> %d, descriptors %d -> %d, sockets %d -> %d, children %d -> %d",
			b.Threads, a.Threads, b.Descriptors, a.Descriptors, b.Sockets, a.Sockets, b.Children, a.Children)
	} else {
		fmt.Fprintf(w, " (process counts unavailable: %v)", before.countsErr)
	}
	fmt.Fprintf(w, "\nheap in use %d KiB -> %d KiB\n", before.heapInuse>>10, after.heapInuse>>10)
}

// printChecks writes the invariants with a pass or fail mark each.
func printChecks(w io.Writer, cs []check) {
	fmt.Fprintln(w, "invariants:")
	for _, c := range cs {
		status := "ok  "
		if !c.ok {
			status = "FAIL"
		}
		fmt.Fprintf(w, "  %s %s (%s)\n", status, c.name, c.detail)
	}
}
