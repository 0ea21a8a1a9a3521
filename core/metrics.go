package core

import "github.com/puzpuzpuz/xsync/v3"

// metrics are the operator counters: admissions, rejections by reason and
// leaked permits. Each is a striped counter, so that a rejection flood
// spreads its increments over cache lines instead of contending on one.
// They are bounded by the fixed vocabulary and never keyed by request
// strings.
type metrics struct {
	admitted *xsync.Counter
	leaked   *xsync.Counter
	rejected []*xsync.Counter // indexed like allErrors
}

func newMetrics() *metrics {
	m := &metrics{admitted: xsync.NewCounter(), leaked: xsync.NewCounter(), rejected: make([]*xsync.Counter, len(allErrors))}
	for i := range m.rejected {
		m.rejected[i] = xsync.NewCounter()
	}
	return m
}

func (m *metrics) reject(err *rejection) { m.rejected[err.index].Inc() }

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
	m := Metrics{Admitted: p.metrics.admitted.Value(), Leaked: p.metrics.leaked.Value(),
		Rejected: make([]RejectionCount, len(allErrors))}
	for i, c := range p.metrics.rejected {
		m.Rejected[i] = RejectionCount{Err: allErrors[i].err(), Count: c.Value()}
	}
	return m
}
