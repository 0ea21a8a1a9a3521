package metrics

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/scheduler"
)

// The label values of the scope and dimension labels of the reserved and
// limit gauges, and of the resource label.
const (
	scopeNode       = "node"
	scopeTenant     = "tenant"
	scopeTrustClass = "trust-class"
	scopeQueueClass = "queue-class"
	scopeCellClass  = "cell-class"

	dimLive   = "live-activations"
	dimQueued = "queued-reservations"
	dimFuel   = "cpu-fuel"
	dimMemory = "memory-bytes"
)

// ErrNoProvider is returned by [New] without a provider.
var ErrNoProvider = errors.New("metrics: a collector needs a provider")

// Config says what a [Collector] reads.
type Config struct {
	// Provider is the node's quota provider: admissions, rejections,
	// leaked permits and every scope's usage. Required.
	Provider *core.LocalQuotaProvider
	// Load is the state the node's sampler publishes into; nil leaves out
	// the load gauges and the rejected-publish counter.
	Load *core.NodeLoadState
	// Clock measures the sample's age; nil is the system clock. Use the
	// clock the sampler stamps samples with.
	Clock deadline.Clock
	// Runner is the node's runner, whose outcome counters become
	// latent_node_activations_total; nil leaves the series out.
	Runner *runner.Runner
	// Scheduler is the node's scheduler, whose queue-wait histograms
	// become latent_node_queue_wait_seconds; nil leaves the series out.
	Scheduler *scheduler.Scheduler
}

// Collector is a prometheus.Collector over a node's admission state. It
// keeps no counters of its own: every value is read from the provider and
// the load state when scraped, so admission pays nothing for it.
type Collector struct {
	provider *core.LocalQuotaProvider
	load     *core.NodeLoadState
	clock    deadline.Clock
	runner   *runner.Runner
	sched    *scheduler.Scheduler

	admitted, rejected, leaked  *prometheus.Desc
	reserved, limit             *prometheus.Desc
	pressure, age, publishError *prometheus.Desc
	activations, queueWait      *prometheus.Desc

	// outcomes are the runner's terminal outcomes, each with the index in
	// outcomeLabels of the series it counts toward when its cell was
	// released.
	outcomes []outcomeSeries

	// rejections maps each of core.AllErrors to its series; errors that
	// share all five label values share a series, so no two series ever
	// carry the same labels.
	rejections []int
	// rejectionLabels are the label values of each series.
	rejectionLabels [][]string
}

// New builds a collector; register it with a prometheus.Registerer.
func New(cfg Config) (*Collector, error) {
	if cfg.Provider == nil {
		return nil, ErrNoProvider
	}
	c := &Collector{provider: cfg.Provider, load: cfg.Load, clock: cfg.Clock, runner: cfg.Runner, sched: cfg.Scheduler}
	if c.clock == nil {
		c.clock = deadline.System{}
	}
	c.admitted = prometheus.NewDesc("latent_admission_admitted_total", "Activations admitted.", nil, nil)
	c.rejected = prometheus.NewDesc("latent_admission_rejected_total", "Admission requests rejected, by error.",
		[]string{"code", "scope", "dimension", "reason", "retryable"}, nil)
	c.leaked = prometheus.NewDesc("latent_admission_leaked_permits_total",
		"Permits dropped without release and reclaimed by the garbage collector.", nil, nil)
	scopeLabels := []string{"scope", "name", "dimension"}
	c.reserved = prometheus.NewDesc("latent_admission_reserved", "Reserved capacity per scope and dimension.", scopeLabels, nil)
	c.limit = prometheus.NewDesc("latent_admission_limit", "Configured limit per scope and dimension.", scopeLabels, nil)
	c.pressure = prometheus.NewDesc("latent_admission_load_pressure", "Pressure of the current load sample, 0 to 1.",
		[]string{"resource"}, nil)
	c.age = prometheus.NewDesc("latent_admission_load_sample_age_seconds", "Age of the current load sample.", nil, nil)
	c.publishError = prometheus.NewDesc("latent_admission_load_publish_rejected_total", "Load sample publishes refused.", nil, nil)
	c.activations = prometheus.NewDesc("latent_node_activations_total", "Activations executed, by terminal outcome.",
		[]string{"outcome"}, nil)
	c.queueWait = prometheus.NewDesc("latent_node_queue_wait_seconds",
		"Time activations waited in their queue class before dispatch onto a cell.", []string{"queue_class"}, nil)
	for _, o := range runner.Outcomes() {
		c.outcomes = append(c.outcomes, outcomeSeries{outcome: o, series: outcomeLabel(o)})
	}

	seen := map[[5]string]int{}
	for _, e := range core.AllErrors() {
		key := [5]string{string(e.Code()), string(e.Scope()), string(e.Dimension()), string(e.Reason()), strconv.FormatBool(e.Retryable())}
		i, ok := seen[key]
		if !ok {
			i = len(c.rejectionLabels)
			seen[key] = i
			c.rejectionLabels = append(c.rejectionLabels, key[:])
		}
		c.rejections = append(c.rejections, i)
	}
	return c, nil
}

// Describe sends every metric's descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.admitted, c.rejected, c.leaked, c.reserved, c.limit} {
		ch <- d
	}
	if c.load != nil {
		ch <- c.pressure
		ch <- c.age
		ch <- c.publishError
	}
	if c.runner != nil {
		ch <- c.activations
	}
	if c.sched != nil {
		ch <- c.queueWait
	}
}

// Collect reads the counters, one consistent usage snapshot and the
// current load sample.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.provider.Metrics()
	ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(m.Admitted))
	ch <- prometheus.MustNewConstMetric(c.leaked, prometheus.CounterValue, float64(m.Leaked))
	counts := make([]float64, len(c.rejectionLabels))
	for i, r := range m.Rejected {
		if i < len(c.rejections) {
			counts[c.rejections[i]] += float64(r.Count)
		}
	}
	for i, labels := range c.rejectionLabels {
		ch <- prometheus.MustNewConstMetric(c.rejected, prometheus.CounterValue, counts[i], labels...)
	}
	c.collectUsage(ch, c.provider.Usage())
	if c.load != nil {
		ch <- prometheus.MustNewConstMetric(c.publishError, prometheus.CounterValue, float64(c.load.RejectedPublishes()))
		if s, ok := c.load.CurrentLoad(); ok {
			ch <- prometheus.MustNewConstMetric(c.pressure, prometheus.GaugeValue, s.CPUPressure, "cpu")
			ch <- prometheus.MustNewConstMetric(c.pressure, prometheus.GaugeValue, s.MemoryPressure, "memory")
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, c.clock.Now().Sub(s.ObservedAt).Seconds())
		}
	}
	if c.runner != nil {
		c.collectActivations(ch)
	}
	if c.sched != nil {
		c.collectQueueWaits(ch)
	}
}

func (c *Collector) collectUsage(ch chan<- prometheus.Metric, u core.Usage) {
	full := func(scope string, s core.ScopeUsage) {
		for _, d := range [...]struct {
			dim             string
			reserved, limit uint64
		}{
			{dimLive, s.Live, s.Limits.MaxLiveActivations},
			{dimQueued, s.Queued, s.Limits.MaxQueuedReservations},
			{dimFuel, s.CPUFuel, s.Limits.MaxReservedCPUFuel},
			{dimMemory, s.MemoryBytes, s.Limits.MaxReservedMemoryBytes},
		} {
			ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(d.reserved), scope, s.Name, d.dim)
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(d.limit), scope, s.Name, d.dim)
		}
	}
	full(scopeNode, u.Node)
	for _, s := range u.Tenants {
		full(scopeTenant, s)
	}
	for _, s := range u.TrustClasses {
		full(scopeTrustClass, s)
	}
	for _, q := range u.QueueClasses {
		ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(q.Queued), scopeQueueClass, q.Name, dimQueued)
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(q.MaxQueued), scopeQueueClass, q.Name, dimQueued)
	}
	// A cell class has no limit of its own: its live backlog is what the
	// feasibility check divides by the class's parallelism.
	for _, cc := range u.CellClasses {
		ch <- prometheus.MustNewConstMetric(c.reserved, prometheus.GaugeValue, float64(cc.Live), scopeCellClass, cc.Class.String(), dimLive)
	}
}
