package core

import "sync/atomic"

// metrics are the operator counters: admissions, leaked permits and
// rejections by error. They are bounded by the fixed vocabulary and never
// keyed by request strings.
//
// Each counter is one atomic word on a cache line of its own, so that
// increments of different counters (the admissions and each rejection
// row) never contend. Requests that end the same way on many cores at
// once do share a line; that costs a contended add (a few tens of
// nanoseconds under a flood of one kind) and buys counters that need no
// stripe choice and no summing. The counters are allocated at startup.
type metrics struct {
	counters []paddedCounter
}

// paddedCounter is a counter alone on its cache line.
type paddedCounter struct {
	n atomic.Int64
	_ [cacheLineBytes - 8]byte
}

const cacheLineBytes = 64

// Counter positions; rejection i is at firstRejection+i, indexed like
// allErrors.
const (
	admittedCounter = iota
	leakedCounter
	firstRejection
)

func newMetrics() *metrics {
	return &metrics{counters: make([]paddedCounter, firstRejection+len(allErrors))}
}

func (m *metrics) inc(counter int) { m.counters[counter].n.Add(1) }

func (m *metrics) value(counter int) int64 { return m.counters[counter].n.Load() }

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
	m := Metrics{Admitted: p.metrics.value(admittedCounter), Leaked: p.metrics.value(leakedCounter),
		Rejected: make([]RejectionCount, len(allErrors))}
	for i := range allErrors {
		m.Rejected[i] = RejectionCount{Err: allErrors[i].err(), Count: p.metrics.value(firstRejection + i)}
	}
	return m
}
