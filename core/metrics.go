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
	rejected [len(Reasons)]*xsync.Counter
}

func newMetrics() *metrics {
	m := &metrics{admitted: xsync.NewCounter(), leaked: xsync.NewCounter()}
	for i := range m.rejected {
		m.rejected[i] = xsync.NewCounter()
	}
	return m
}

func (m *metrics) reject(err *Error) { m.rejected[err.reasonIndex].Inc() }

// Metrics is a point-in-time copy of the operator counters.
type Metrics struct {
	Admitted int64
	Leaked   int64
	Rejected map[Reason]int64 // only reasons seen at least once
}

// Metrics copies the provider's operator counters.
func (p *LocalQuotaProvider) Metrics() Metrics {
	m := Metrics{Admitted: p.metrics.admitted.Value(), Leaked: p.metrics.leaked.Value(), Rejected: map[Reason]int64{}}
	for i, c := range p.metrics.rejected {
		if v := c.Value(); v != 0 {
			m.Rejected[Reasons[i]] = v
		}
	}
	return m
}
