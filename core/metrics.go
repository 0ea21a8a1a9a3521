package core

import (
	"sync/atomic"
	"unsafe"
)

// metrics are the operator counters: leaked permits and rejections by
// error (the ledger counts admissions). They are bounded by the fixed vocabulary and never
// keyed by request strings.
//
// Each counter is striped: metricStripes copies, each alone on its cache
// line, and an increment adds to the stripe its goroutine's stack address
// picks (see stripe). A read sums the stripes. The stripes are allocated
// at startup.
type metrics struct {
	counters []paddedCounter // stripe s, counter c at s*perStripe + c
}

// metricStripes is the number of copies of each counter: a power of two.
const (
	metricStripesLog2 = 4
	metricStripes     = 1 << metricStripesLog2
)

// paddedCounter is a counter alone on its cache line.
type paddedCounter struct {
	n atomic.Int64
	_ [cacheLineBytes - 8]byte
}

const cacheLineBytes = 64

// Counter positions; rejection i is at firstRejection+i, indexed like
// allErrors.
const (
	leakedCounter = iota
	firstRejection
)

// perStripe is the number of counters in one stripe.
var perStripe = firstRejection + len(allErrors)

func newMetrics() *metrics {
	return &metrics{counters: make([]paddedCounter, metricStripes*perStripe)}
}

// inc counts one event on the calling goroutine's stripe.
func (m *metrics) inc(counter int) {
	m.counters[stripe()*perStripe+counter].n.Add(1)
}

// stripe is the calling goroutine's stripe: a multiplicative hash of the
// address of a variable on its stack, above the smallest stack size
// (2 KiB), so goroutines running at once land on different stripes and
// one goroutine mostly on the same one. This is a trick, and it stays
// because no plain form measured close (interleaved, pinned CPU time and
// -cpu 2 throughput, against 7bc7c91):
//   - the stripe from the activation ID (the previous form) put every
//     goroutine of BenchmarkParallel's reject workload on one line, since
//     their rejected requests share an ID: 0.41x 3d4dd55's rejections/s;
//   - xsync.Counter (a pooled per-P token, as node/ uses) added 14 to
//     29 ns to the cheapest rejection (invalid-identifier, about 21 ns);
//   - a random stripe (math/rand/v2) added about 9 ns to it.
//
// The address is only hashed, never dereferenced or kept.
func stripe() int {
	var frame byte
	h := uint64(uintptr(unsafe.Pointer(&frame))>>11) * 0x9e3779b97f4a7c15
	return int(h >> (64 - metricStripesLog2))
}

func (m *metrics) value(counter int) int64 {
	var sum int64
	for stripe := range metricStripes {
		sum += m.counters[stripe*perStripe+counter].n.Load()
	}
	return sum
}

// reject counts a rejection.
func (m *metrics) reject(err *rejection) { m.inc(firstRejection + int(err.index)) }

// Metrics is a point-in-time copy of the operator counters.
type Metrics struct {
	Admitted int64
	Leaked   int64
	// Rejected has one entry per error the package can return, in the
	// order of [AllErrors], zero counts included.
	Rejected []RejectionCount
}

// RejectionCount is how often one error has been returned by admission.
type RejectionCount struct {
	Err   Error
	Count int64
}

// RejectedByReason sums the rejections per reason; a reason never seen
// is absent.
func (m Metrics) RejectedByReason() map[Reason]int64 {
	out := map[Reason]int64{}
	for _, r := range m.Rejected {
		if r.Count != 0 {
			out[r.Err.Reason()] += r.Count
		}
	}
	return out
}

// Metrics copies the provider's operator counters.
func (p *LocalQuotaProvider) Metrics() Metrics {
	// Every admission made one reservation, and the ledger counts them
	// under its mutex, so the admission path pays no counter of its own.
	m := Metrics{Admitted: int64(p.ledger.Reserved()), Leaked: p.metrics.value(leakedCounter),
		Rejected: make([]RejectionCount, len(allErrors))}
	for i := range allErrors {
		m.Rejected[i] = RejectionCount{Err: allErrors[i].err(), Count: p.metrics.value(firstRejection + i)}
	}
	return m
}
