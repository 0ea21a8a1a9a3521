package metrics_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/edge/metrics"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// pipelineNode is the example policy's admission with a pipeline over a
// synthetic backend, all on clock, and a collector over all of it.
type pipelineNode struct {
	provider   *core.LocalQuotaProvider
	controller *core.AdmissionController
	pipe       *pipeline.Pipeline
	backend    *synthetic.Backend
	reg        *prometheus.Registry
}

// newPipelineNode builds the node on clock (nil: the system clock); the
// context deadlines the scheduler derives from grants run on real time,
// so clock must stay near it. Load samples are accepted for a minute.
func newPipelineNode(t *testing.T, clock deadline.Clock, plan synthetic.Plan) *pipelineNode {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "policy", "node.json"))
	require.NoError(t, err)
	p, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	p.Node.Overload.MaximumObservationAge = time.Minute
	provider, err := core.NewLocalQuotaProvider(p)
	require.NoError(t, err)
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	load := core.NewNodeLoadState(time.Minute, clock)
	require.NoError(t, load.Publish(core.LoadSample{Sequence: 1, ObservedAt: now(), CPUPressure: 0.1, MemoryPressure: 0.1}))
	n := &pipelineNode{provider: provider, backend: synthetic.New(plan)}
	n.controller = provider.Controller(core.ControllerConfig{Source: source{}, Load: load, Clock: clock})
	n.pipe, err = pipeline.New(provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": n.backend}, Clock: clock})
	require.NoError(t, err)
	t.Cleanup(n.pipe.Close)
	c, err := metrics.New(metrics.Config{Provider: provider, Load: load, Clock: clock, Runner: n.pipe.Runner(), Scheduler: n.pipe.Scheduler()})
	require.NoError(t, err)
	n.reg = prometheus.NewPedanticRegistry()
	n.reg.MustRegister(c)
	return n
}

// nodeSeries is the scraped values of the latent_node_ series only.
func nodeSeries(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	values, types := scrape(t, reg)
	for k := range values {
		if !strings.HasPrefix(k, "latent_node_") {
			delete(values, k)
		}
	}
	for k := range types {
		if !strings.HasPrefix(k, "latent_node_") {
			delete(types, k)
		}
	}
	return values, types
}

// A known sequence of runner outcomes, each acted out by the synthetic
// backend through the whole pipeline, scraped and parsed: every outcome
// series has exactly the count the mapping implies, zeros included, and
// a quarantined cell counts as uncertain-cleanup whatever the guest did.
func TestActivationOutcomesAfterAKnownSequence(t *testing.T) {
	hold := make(chan struct{}) // never closed: the canceled guest waits on it
	started := make(chan struct{}, 1)
	n := newPipelineNode(t, nil, synthetic.ByInput(map[string]synthetic.Behavior{
		"ok":        {Output: []byte("out")},
		"declared":  {Exit: runner.ExitDeclaredError},
		"trap":      {Exit: runner.ExitTrapped},
		"memory":    {Memory: 2 << 20}, // the grant is 1 MiB
		"fuel":      {Fuel: 2_000_000}, // the grant is 1e6
		"deadline":  {Block: true},
		"canceled":  {Hold: hold, Started: func() { started <- struct{}{} }},
		"platform":  {Exit: runner.ExitPlatformFailure},
		"uncertain": {UncertainCleanup: true},
		"panic":     {Panic: true},
	}))

	invoke := func(input string, wantOutcome runner.Outcome, wantDisposition runner.Disposition) {
		t.Helper()
		req := request("acme")
		if input == "deadline" {
			req.RequestedBudget.WallTime = policy.Some(300 * time.Millisecond)
		}
		rep, _ := n.pipe.Invoke(context.Background(), n.controller, req, []byte(input))
		require.Equal(t, wantOutcome, rep.Outcome, input)
		require.Equal(t, wantDisposition, rep.Disposition, input)
	}
	for range 3 {
		invoke("ok", runner.Succeeded, runner.Released)
	}
	invoke("declared", runner.DeclaredError, runner.Released)
	for range 2 {
		invoke("trap", runner.Trapped, runner.Released)
	}
	invoke("memory", runner.MemoryExhausted, runner.Released)
	invoke("fuel", runner.FuelExhausted, runner.Released)
	invoke("deadline", runner.DeadlineExceeded, runner.Released)
	invoke("platform", runner.PlatformFailure, runner.Released)
	invoke("uncertain", runner.Succeeded, runner.Quarantined)
	invoke("panic", runner.PlatformFailure, runner.Quarantined)

	// Cancelled by its caller while running.
	ctx, cancel := context.WithCancel(context.Background())
	permit, err := n.controller.Admit(request("acme"))
	require.NoError(t, err)
	a, err := n.pipe.Submit(ctx, permit, []byte("canceled"))
	require.NoError(t, err)
	<-started
	cancel()
	rep, _ := a.Wait(context.Background())
	require.Equal(t, runner.Canceled, rep.Outcome)
	require.Equal(t, runner.Released, rep.Disposition)

	got, types := nodeSeries(t, n.reg)
	wantSeries := map[string]float64{
		"success": 3, "declared-error": 1, "trap": 3, "deadline": 2, "fuel": 1, "platform-failure": 1, "uncertain-cleanup": 2,
	}
	activations := func(scraped map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range scraped {
			if strings.HasPrefix(k, "latent_node_activations_total") {
				out[k] = v
			}
		}
		return out
	}
	want := map[string]float64{}
	var total float64
	for label, v := range wantSeries {
		total += v
		want[series("latent_node_activations_total", "outcome="+label)] = v
	}
	assert.Equal(t, want, activations(got))
	assert.Equal(t, dto.MetricType_COUNTER, types["latent_node_activations_total"])
	assert.Equal(t, dto.MetricType_HISTOGRAM, types["latent_node_queue_wait_seconds"])
	// No double counting: the series add up to the runner's activations
	// and to the guests the backend ran, one per activation.
	var executed int64
	for _, v := range n.pipe.Runner().Stats().Outcomes {
		executed += v
	}
	assert.Equal(t, 13.0, total, "series total")
	assert.Equal(t, int64(13), executed, "the runner's activations")
	assert.Equal(t, int64(13), n.backend.Runs(), "the backend's runs")
	assert.Zero(t, n.backend.Violations(), "cell violations")
	// A second scrape of an idle node reads the same.
	again, _ := nodeSeries(t, n.reg)
	assert.Equal(t, want, activations(again), "second scrape")
}

// Known waits on an injected clock: activations queue behind held cells,
// dispatch when the clock says 100ms, and the histogram per queue class
// has exactly the bucket counts, sum and count those waits imply, as the
// text exposition carries them.
func TestQueueWaitHistogramAfterKnownWaits(t *testing.T) {
	clock := &manualClock{}
	t0 := time.Now()
	clock.set(t0)
	n := newPipelineNode(t, clock, nil)

	var leases []*cellpool.Lease
	for {
		l, err := n.pipe.Pool().Acquire(policy.Tiny)
		if err != nil {
			break
		}
		leases = append(leases, l)
	}
	var acts []*runner.Activation
	submit := func(at time.Duration, priority uint32) {
		t.Helper()
		clock.set(t0.Add(at))
		req := request("acme")
		req.Priority = priority
		permit, err := n.controller.Admit(req)
		require.NoError(t, err)
		a, err := n.pipe.Submit(context.Background(), permit, nil)
		require.NoError(t, err)
		acts = append(acts, a)
	}
	submit(0, 0)                     // batch: waits 2.5s
	submit(2400*time.Millisecond, 0) // batch: 100ms
	submit(2497*time.Millisecond, 0) // batch: 3ms
	submit(2000*time.Millisecond, 5) // interactive: 500ms
	clock.set(t0.Add(2500 * time.Millisecond))
	for _, l := range leases {
		l.Release()
	}
	for _, a := range acts {
		rep, err := a.Wait(context.Background())
		require.NoError(t, err)
		require.Equal(t, runner.Succeeded, rep.Outcome)
	}

	got, _ := nodeSeries(t, n.reg)
	want := map[string]float64{}
	for k, v := range got {
		if strings.HasPrefix(k, "latent_node_activations_total") {
			want[k] = v
		}
	}
	hist := func(class string, waits ...time.Duration) {
		var sum time.Duration
		for _, w := range waits {
			sum += w
		}
		for _, b := range []time.Duration{time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
			25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
			time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second} {
			var below float64
			for _, w := range waits {
				if w <= b {
					below++
				}
			}
			want[series("latent_node_queue_wait_seconds_bucket", "queue_class="+class, "le="+strconv.FormatFloat(b.Seconds(), 'g', -1, 64))] = below
		}
		want[series("latent_node_queue_wait_seconds_bucket", "queue_class="+class, "le=+Inf")] = float64(len(waits))
		want[series("latent_node_queue_wait_seconds_sum", "queue_class="+class)] = sum.Seconds()
		want[series("latent_node_queue_wait_seconds_count", "queue_class="+class)] = float64(len(waits))
	}
	hist("batch", 2500*time.Millisecond, 100*time.Millisecond, 3*time.Millisecond)
	hist("interactive", 500*time.Millisecond)
	assert.Equal(t, want, got)
	assert.Equal(t, 4.0, want[series("latent_node_activations_total", "outcome=success")], "successes")
}

// Without a runner or a scheduler their series are absent.
func TestWithoutRunnerOrSchedulerTheNodeSeriesAreAbsent(t *testing.T) {
	n := newNode(t)
	for _, cfg := range []metrics.Config{{Provider: n.provider}, {Provider: n.provider, Runner: func() *runner.Runner {
		r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": synthetic.New(nil)}})
		require.NoError(t, err)
		return r
	}()}} {
		c, err := metrics.New(cfg)
		require.NoError(t, err)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		_, types := scrape(t, reg)
		assert.NotContains(t, types, "latent_node_queue_wait_seconds", "queue wait histogram without a scheduler")
		if cfg.Runner != nil {
			assert.Contains(t, types, "latent_node_activations_total")
		} else {
			assert.NotContains(t, types, "latent_node_activations_total")
		}
	}
}
