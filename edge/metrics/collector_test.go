package metrics_test

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core"
	"latent.dev/admission/edge/metrics"
)

// scrape serves reg as Prometheus would scrape it and parses the text
// exposition into "name{k=v,...}" -> value, and name -> type.
func scrape(t *testing.T, reg *prometheus.Registry) (map[string]float64, map[string]dto.MetricType) {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code, "scrape: %s", rec.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	require.NoError(t, err, "parse")
	values, types := map[string]float64{}, map[string]dto.MetricType{}
	for name, f := range families {
		types[name] = f.GetType()
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				// As the exposition writes it: cumulative buckets by le,
				// the sum and the count.
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					le := strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					values[series(name+"_bucket", append(labels, "le="+le)...)] = float64(b.GetCumulativeCount())
				}
				values[series(name+"_bucket", append(labels, "le=+Inf")...)] = float64(h.GetSampleCount())
				values[series(name+"_sum", labels...)] = h.GetSampleSum()
				values[series(name+"_count", labels...)] = float64(h.GetSampleCount())
				continue
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: unexpected type %v", name, f.GetType())
			}
			values[series(name, labels...)] = v
		}
	}
	return values, types
}

func series(name string, labels ...string) string {
	labels = append([]string(nil), labels...)
	sort.Strings(labels)
	return name + "{" + strings.Join(labels, ",") + "}"
}

func rejectionSeries(e core.Error) string {
	return series("latent_admission_rejected_total", "code="+string(e.Code()), "scope="+string(e.Scope()),
		"dimension="+string(e.Dimension()), "reason="+string(e.Reason()), "retryable="+strconv.FormatBool(e.Retryable()))
}

func register(t testing.TB, n *node) *prometheus.Registry {
	t.Helper()
	c, err := metrics.New(metrics.Config{Provider: n.provider, Load: n.load, Clock: n.clock})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}

// A known sequence of admissions, rejections, a leaked permit and load
// publishes, scraped through a registry and parsed with the Prometheus
// text parser: every series, with its name, labels, type and value, is
// exactly what the sequence implies, and there is no other.
func TestScrapeAfterAKnownSequence(t *testing.T) {
	n := newNode(t)
	reg := register(t, n)
	at := func(d time.Duration) time.Time { return n.t0.Add(d) }
	require.NoError(t, n.load.Publish(core.LoadSample{Sequence: 1, ObservedAt: at(0), CPUPressure: 0.25, MemoryPressure: 0.5}))
	admit := func(req *core.AdmissionRequest) *core.AdmissionPermit {
		t.Helper()
		n.clock.set(at(10 * time.Millisecond))
		p, err := n.controller.Admit(req)
		require.NoError(t, err)
		return p
	}
	executing, err := admit(request("acme")).StartExecution()
	require.NoError(t, err)
	defer executing.Release()
	queued := admit(request("acme"))
	defer queued.Release()
	admit(request("globex")).Release()

	// A leaked permit: dropped without release, reclaimed by the GC.
	func() { admit(request("globex")) }()
	// Bounded by time (a minute), not by tries: on a loaded machine the
	// finalizer goroutine may wait long for its turn.
	require.Eventually(t, func() bool {
		runtime.GC()
		return n.provider.Metrics().Leaked != 0
	}, time.Minute, time.Millisecond, "the dropped permit was never reclaimed")

	rejected := map[string]float64{}
	reject := func(req *core.AdmissionRequest, now time.Duration, reason core.Reason) {
		t.Helper()
		n.clock.set(at(now))
		_, err := n.controller.Admit(req)
		var e core.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, reason, e.Reason(), "%v", err)
		rejected[rejectionSeries(e)]++
	}
	for range 2 {
		req := request("acme")
		req.Principal.Subject = "mallory"
		reject(req, 20*time.Millisecond, core.ReasonPrincipalNotAuthorized)
	}
	req := request("acme")
	req.Priority = 1 << 30
	reject(req, 20*time.Millisecond, core.ReasonPriorityNotAuthorized)
	reject(request("acme"), 10*time.Second, core.ReasonLoadUnavailable)

	// One refused publish, then a valid sample half a second in.
	require.Error(t, n.load.Publish(core.LoadSample{Sequence: 2, ObservedAt: at(100 * time.Millisecond), CPUPressure: math.NaN()}),
		"a NaN pressure was accepted")
	require.NoError(t, n.load.Publish(core.LoadSample{Sequence: 3, ObservedAt: at(500 * time.Millisecond), CPUPressure: 0.75, MemoryPressure: 0.125}))
	n.clock.set(at(2 * time.Second))

	want := map[string]float64{
		series("latent_admission_admitted_total"):                   4,
		series("latent_admission_leaked_permits_total"):             1,
		series("latent_admission_load_publish_rejected_total"):      1,
		series("latent_admission_load_pressure", "resource=cpu"):    0.75,
		series("latent_admission_load_pressure", "resource=memory"): 0.125,
		series("latent_admission_load_sample_age_seconds"):          1.5,
	}
	for _, e := range core.AllErrors() {
		want[rejectionSeries(e)] = rejected[rejectionSeries(e)]
	}
	// Two acme permits remain: one executing, one queued, each with the
	// grant the permit carries.
	grant := queued.Grant().Budget
	dims := func(scope, name string, live, queuedN uint64, limits [4]uint64) {
		values := [4]uint64{live, queuedN, live * grant.CPUFuel, live * grant.MemoryBytes}
		for i, dim := range []string{"live-activations", "queued-reservations", "cpu-fuel", "memory-bytes"} {
			want[series("latent_admission_reserved", "scope="+scope, "name="+name, "dimension="+dim)] = float64(values[i])
			want[series("latent_admission_limit", "scope="+scope, "name="+name, "dimension="+dim)] = float64(limits[i])
		}
	}
	p := n.policy
	lim := func(l [4]uint64) [4]uint64 { return l }
	dims("node", "", 2, 1, lim([4]uint64{p.Node.Limits.MaxLiveActivations, p.Node.Limits.MaxQueuedReservations,
		p.Node.Limits.MaxReservedCPUFuel, p.Node.Limits.MaxReservedMemoryBytes}))
	for _, tn := range p.Tenants {
		var live, q uint64
		if tn.ID == "acme" {
			live, q = 2, 1
		}
		dims("tenant", tn.ID, live, q, [4]uint64{tn.Limits.MaxLiveActivations, tn.Limits.MaxQueuedReservations,
			tn.Limits.MaxReservedCPUFuel, tn.Limits.MaxReservedMemoryBytes})
	}
	for _, tc := range p.TrustClasses {
		var live, q uint64
		if tc.Name == "standard" {
			live, q = 2, 1
		}
		dims("trust-class", tc.Name, live, q, [4]uint64{tc.Limits.MaxLiveActivations, tc.Limits.MaxQueuedReservations,
			tc.Limits.MaxReservedCPUFuel, tc.Limits.MaxReservedMemoryBytes})
	}
	for _, qc := range p.QueueClasses {
		var q float64
		if qc.Name == queued.Grant().Obligations.QueueClass {
			q = 1
		}
		want[series("latent_admission_reserved", "scope=queue-class", "name="+qc.Name, "dimension=queued-reservations")] = q
		want[series("latent_admission_limit", "scope=queue-class", "name="+qc.Name, "dimension=queued-reservations")] = float64(qc.MaxQueued)
	}
	for _, cc := range p.CellClasses {
		var live float64
		if cc.Class == queued.Grant().Obligations.CellClass.String() {
			live = 2
		}
		want[series("latent_admission_reserved", "scope=cell-class", "name="+cc.Class, "dimension=live-activations")] = live
	}

	got, types := scrape(t, reg)
	assert.Equal(t, want, got, "series")
	wantTypes := map[string]dto.MetricType{
		"latent_admission_admitted_total": dto.MetricType_COUNTER, "latent_admission_rejected_total": dto.MetricType_COUNTER,
		"latent_admission_leaked_permits_total": dto.MetricType_COUNTER, "latent_admission_reserved": dto.MetricType_GAUGE,
		"latent_admission_limit": dto.MetricType_GAUGE, "latent_admission_load_pressure": dto.MetricType_GAUGE,
		"latent_admission_load_sample_age_seconds": dto.MetricType_GAUGE, "latent_admission_load_publish_rejected_total": dto.MetricType_COUNTER,
	}
	assert.Equal(t, wantTypes, types, "families")
	assert.Len(t, rejected, 3, "distinct errors the sequence hit")
}

// Rejections that name 10,000 distinct unknown tenants and services add
// no series: every label value is fixed vocabulary or a configured name.
func TestDistinctRejectedNamesAddNoSeries(t *testing.T) {
	n := newNode(t)
	reg := register(t, n)
	require.NoError(t, n.load.Publish(core.LoadSample{Sequence: 1, ObservedAt: n.t0, CPUPressure: 0.1, MemoryPressure: 0.1}))
	before, _ := scrape(t, reg)
	for i := range 10_000 {
		req := request("acme")
		if i%2 == 0 {
			req.Principal.Tenant = fmt.Sprintf("tenant-%d", i)
			req.Revision.Tenant = req.Principal.Tenant
		} else {
			req.Revision.Service = fmt.Sprintf("svc-%d", i)
		}
		_, err := n.controller.Admit(req)
		require.Error(t, err, "an unknown tenant or service was admitted")
	}
	after, _ := scrape(t, reg)
	for k := range after {
		assert.Contains(t, before, k, "a series new after 10,000 distinct rejections")
		assert.NotContains(t, k, "tenant-", "a request's name reached a label")
		assert.NotContains(t, k, "svc-", "a request's name reached a label")
	}
	assert.Len(t, after, len(before), "series after 10,000 distinct rejections")
	var total float64
	for k, v := range after {
		if strings.HasPrefix(k, "latent_admission_rejected_total{") {
			total += v
		}
	}
	assert.Equal(t, 10_000.0, total, "rejections counted")
}

func TestNewNeedsAProvider(t *testing.T) {
	_, err := metrics.New(metrics.Config{})
	assert.ErrorIs(t, err, metrics.ErrNoProvider)
}

// Without a load state the load series are absent, and the rest scrape.
func TestWithoutLoadStateTheLoadSeriesAreAbsent(t *testing.T) {
	n := newNode(t)
	c, err := metrics.New(metrics.Config{Provider: n.provider})
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	_, types := scrape(t, reg)
	for name := range types {
		assert.NotContains(t, name, "load")
	}
	assert.Contains(t, types, "latent_admission_reserved")
}
