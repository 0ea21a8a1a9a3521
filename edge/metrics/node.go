package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"latent.dev/admission/node/runner"
)

// The values of the outcome label of latent_node_activations_total, in
// the order of the table in docs/edge.md; an index into outcomeLabels.
const (
	outcomeSuccess = iota
	outcomeDeclaredError
	outcomeTrap
	outcomeDeadline
	outcomeFuel
	outcomePlatformFailure
	outcomeUncertainCleanup
	numOutcomeLabels
)

var outcomeLabels = [numOutcomeLabels]string{"success", "declared-error", "trap", "deadline", "fuel",
	"platform-failure", "uncertain-cleanup"}

// outcomeSeries is one runner outcome and the series its released
// activations count toward.
type outcomeSeries struct {
	outcome runner.Outcome
	series  int
}

// outcomeLabel is the series an activation with outcome o counts toward
// when the backend released its cell; a quarantined activation counts
// toward uncertain-cleanup whatever its outcome (see the package
// documentation for the table and the reasons).
func outcomeLabel(o runner.Outcome) int {
	switch o {
	case runner.Succeeded:
		return outcomeSuccess
	case runner.DeclaredError:
		return outcomeDeclaredError
	case runner.Trapped, runner.MemoryExhausted:
		// The guest overran its memory grant: a guest fault, as a trap
		// is (a Wasm memory.grow past the limiter traps).
		return outcomeTrap
	case runner.DeadlineExceeded, runner.Canceled:
		// The activation's context ended before the guest did: its
		// deadline, or its caller giving up. Neither the guest's fault
		// nor the platform's.
		return outcomeDeadline
	case runner.FuelExhausted:
		return outcomeFuel
	}
	// PlatformFailure, and any outcome a newer runner adds: the node, not
	// the guest, failed to carry the activation to a result.
	return outcomePlatformFailure
}

// collectActivations reads the runner's counters: each executed
// activation is counted once, under its outcome and its cell's
// disposition, and every such count only grows, so each series does too.
func (c *Collector) collectActivations(ch chan<- prometheus.Metric) {
	var counts [numOutcomeLabels]float64
	for _, o := range c.outcomes {
		counts[o.series] += float64(c.runner.Count(o.outcome, runner.Released))
		counts[outcomeUncertainCleanup] += float64(c.runner.Count(o.outcome, runner.Quarantined))
	}
	for i, label := range outcomeLabels {
		ch <- prometheus.MustNewConstMetric(c.activations, prometheus.CounterValue, counts[i], label)
	}
}

// collectQueueWaits turns each queue class's histogram into a constant
// Prometheus histogram.
func (c *Collector) collectQueueWaits(ch chan<- prometheus.Metric) {
	for _, h := range c.sched.QueueWaits() {
		buckets := make(map[float64]uint64, len(h.Bounds))
		for i, b := range h.Bounds {
			buckets[b.Seconds()] = h.Cumulative[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.queueWait, h.Count, h.Sum.Seconds(), buckets, h.QueueClass)
	}
}
