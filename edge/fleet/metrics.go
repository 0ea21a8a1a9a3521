package fleet

import "github.com/prometheus/client_golang/prometheus"

// The values of the op label of the request and failure counters.
const (
	opGrant     = "grant"
	opKeepAlive = "keep-alive"
	opRead      = "read"
	opTxn       = "txn"
	opRevoke    = "revoke"
)

var ops = []string{opGrant, opKeepAlive, opRead, opTxn, opRevoke}

// Metrics is the broker's Prometheus collector; register it with
// [Broker.Collector]. Its series are bounded: one per tenant of the
// configuration, one per etcd operation.
type Metrics struct {
	slice       *prometheus.GaugeVec
	held        *prometheus.GaugeVec
	limit       *prometheus.GaugeVec
	failClosed  *prometheus.GaugeVec
	requests    *prometheus.CounterVec
	failures    *prometheus.CounterVec
	conflicts   prometheus.Counter
	leaseLosses prometheus.Counter
	up          prometheus.Gauge
}

func newMetrics(tenants []string) *Metrics {
	m := &Metrics{
		slice: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latent_fleet_slice",
			Help: "The slice of the tenant's fleet limit this node admits under now (0 when withdrawn)."}, []string{"tenant"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latent_fleet_slice_held",
			Help: "The slice of the tenant's fleet limit this node holds in etcd, as last written."}, []string{"tenant"}),
		limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latent_fleet_limit",
			Help: "The tenant's fleet limit as last read from etcd."}, []string{"tenant"}),
		failClosed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "latent_fleet_fail_closed",
			Help: "1 while the tenant's slice is withdrawn for a missing or undecodable value in etcd."}, []string{"tenant"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_fleet_etcd_requests_total",
			Help: "Requests the fleet broker sent to etcd, by operation."}, []string{"op"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_fleet_etcd_failures_total",
			Help: "Requests to etcd that failed (error, timeout, or a lease etcd no longer has), by operation."}, []string{"op"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "latent_fleet_txn_conflicts_total",
			Help: "Allocation transactions that lost the race to another change of the tenant's keys."}),
		leaseLosses: prometheus.NewCounter(prometheus.CounterOpts{Name: "latent_fleet_lease_losses_total",
			Help: "Times this node's etcd lease expired under it."}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "latent_fleet_etcd_up",
			Help: "1 when etcd answered the broker's last request, 0 when it failed."}),
	}
	for _, t := range tenants {
		m.slice.WithLabelValues(t)
		m.held.WithLabelValues(t)
		m.limit.WithLabelValues(t)
		m.failClosed.WithLabelValues(t)
	}
	for _, op := range ops {
		m.requests.WithLabelValues(op)
		m.failures.WithLabelValues(op)
	}
	return m
}

func (m *Metrics) request(op string) { m.requests.WithLabelValues(op).Inc() }
func (m *Metrics) failure(op string) { m.failures.WithLabelValues(op).Inc() }

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.slice, m.held, m.limit, m.failClosed, m.requests, m.failures, m.conflicts, m.leaseLosses, m.up}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Collector is the broker's metrics, to register with a
// prometheus.Registerer.
func (b *Broker) Collector() prometheus.Collector { return b.metrics }
