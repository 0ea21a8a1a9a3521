package core

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// metrics are the operator counters: admissions, leaked permits and
// rejections by error. They are bounded by the fixed vocabulary and never
// keyed by request strings.
//
// They are striped so that a rejection flood on many cores spreads its
// increments over cache lines instead of contending on one. Each stripe
// is a block holding every counter once, padded to whole cache lines;
// an increment picks the stripe from the address of its own stack frame,
// which differs between goroutines and costs nothing to read (a pool of
// per-goroutine tokens, as striped counters often use, costs more than
// the increment itself here). The stripes are allocated at startup.
type metrics struct {
	stripes []int64 // stripe s holds counters [s*stride, s*stride+numCounters)
	stride  uint64
	mask    uint64
}

// Counter positions within a stripe; rejection i is at firstRejection+i,
// indexed like allErrors.
const (
	admittedCounter = iota
	leakedCounter
	firstRejection
)

// Stripes: four per P, so that two goroutines running at once share one
// with a chance of about one in four times the Ps, up to maxStripes.
const (
	stripesPerP = 4
	maxStripes  = 256
)

func newMetrics() *metrics {
	n := uint64(1)
	for n < stripesPerP*uint64(runtime.GOMAXPROCS(0)) && n < maxStripes {
		n <<= 1
	}
	counters := uint64(firstRejection + len(allErrors))
	stride := (counters + cacheLineWords - 1) / cacheLineWords * cacheLineWords
	// A spare line at each end, so that no stripe shares a line with
	// whatever the allocator put beside the slice.
	all := make([]int64, 2*cacheLineWords+n*stride)
	m := &metrics{stripes: all[cacheLineWords : cacheLineWords+n*stride], stride: stride, mask: n - 1}
	return m
}

// cacheLineWords is a cache line in int64s.
const cacheLineWords = 64 / 8

// stripe returns the calling goroutine's stripe offset: a multiplicative
// hash of its stack address above the smallest stack size, so goroutines
// land on different stripes and one goroutine mostly on the same one.
func (m *metrics) stripe() uint64 {
	var probe byte
	h := uint64(uintptr(unsafe.Pointer(&probe))>>11) * 0x9e3779b97f4a7c15
	return (h >> 40 & m.mask) * m.stride
}

func (m *metrics) inc(counter int) {
	atomic.AddInt64(&m.stripes[m.stripe()+uint64(counter)], 1)
}

// value sums a counter over every stripe.
func (m *metrics) value(counter int) int64 {
	var sum int64
	for s := uint64(0); s <= m.mask; s++ {
		sum += atomic.LoadInt64(&m.stripes[s*m.stride+uint64(counter)])
	}
	return sum
}

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
