package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/linuxtest"
	"latent.dev/admission/policy"
)

// template is a valid request for one route: a tenant principal allowed
// to call it and a budget that fits.
type template struct {
	principal core.Principal
	target    catalog.Target
	payload   uint64 // the tenant's maximum payload
	priority  uint32
}

// soak is one stress run's shared state.
type soak struct {
	cfg      config
	out      io.Writer
	provider *core.LocalQuotaProvider
	base     *core.AdmissionController
	load     *core.NodeLoadState
	catalog  *catalog.Catalog
	file     catalog.File
	// real is the real load sampler under -load psi; nil for synthetic.
	real *realLoad

	templates []template
	pins      atomic.Pointer[[]*catalog.Pin] // newest first, at most 4

	stop      atomic.Bool
	admitted  atomic.Int64
	rejected  atomic.Int64
	abandoned atomic.Int64
	peakLive  atomic.Uint64
	// seconds is what each progress line printed, for -report.
	seconds []second
}

func newSoak(cfg config, pol *policy.NodeAdmissionPolicy, file catalog.File, out io.Writer) (*soak, error) {
	provider, err := core.NewLocalQuotaProvider(pol)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	cat, err := catalog.FromFile(file)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	s := &soak{cfg: cfg, out: out, provider: provider, load: core.NewNodeLoadState(provider.Policy().Node().Overload.MaximumObservationAge, nil),
		catalog: cat, file: file}
	s.base = provider.Controller(core.ControllerConfig{Load: s.load})
	s.pushPin(cat.Pin())
	s.templates = templatesFor(pol, cat.Pin())
	if len(s.templates) == 0 {
		return nil, fmt.Errorf("no route of the catalog is callable by any allowlisted principal of the policy")
	}
	return s, nil
}

// templatesFor pairs every route with the first allowlisted principal of
// its tenant.
func templatesFor(pol *policy.NodeAdmissionPolicy, pin *catalog.Pin) []template {
	var out []template
	for _, tgt := range pin.Deployments() {
		for _, t := range pol.Tenants {
			if t.ID != tgt.Tenant || len(t.Principals) == 0 {
				continue
			}
			kind, _ := policy.ParsePrincipalKind(t.Principals[0].Kind)
			pr := core.Principal{Kind: kind, Subject: t.Principals[0].Subject, Tenant: t.ID}
			if kind == policy.ServicePrincipal {
				pr.Service = "stress"
			}
			dep, _, _ := pin.Deployment(tgt.Tenant, tgt.Service)
			for _, r := range dep.Routes {
				out = append(out, template{principal: pr, target: catalog.Target{Tenant: tgt.Tenant, Service: tgt.Service, Route: r.Name},
					payload: min(t.MaximumPayloadBytes, pol.Node.MaximumPayloadBytes), priority: min(t.MaximumPriority, pol.Node.MaximumPriority)})
			}
		}
	}
	return out
}

func (s *soak) pushPin(p *catalog.Pin) {
	var next []*catalog.Pin
	if old := s.pins.Load(); old != nil {
		next = append(next, (*old)[:min(len(*old), 3)]...)
	}
	next = append([]*catalog.Pin{p}, next...)
	s.pins.Store(&next)
}

// run soaks for the configured duration and returns the report.
func (s *soak) run() *report {
	rep := &report{seed: s.cfg.seed, workers: s.cfg.workers, duration: s.cfg.duration}
	if s.real == nil {
		s.publish(1, 0.3, 0.3)
	}
	s.warmUp()
	warm := s.provider.Metrics()
	rep.before = sampleResources()

	var background sync.WaitGroup
	background.Add(1)
	if s.real == nil {
		background.Add(1)
		go func() { defer background.Done(); s.sampler() }()
	}
	go func() { defer background.Done(); s.deployer() }()

	workers := make([]*worker, s.cfg.workers)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range workers {
		workers[i] = newWorker(s, s.cfg.seed+uint64(i)*0x9e3779b97f4a7c15)
		wg.Add(1)
		go func(w *worker) { defer wg.Done(); w.loop() }(workers[i])
	}
	s.progress(start)
	s.stop.Store(true)
	wg.Wait()
	background.Wait()
	rep.elapsed = time.Since(start)
	if s.real != nil {
		s.real.stop(s)
	}

	for _, w := range workers {
		w.releaseAll()
		rep.latency.merge(&w.latency)
	}
	rep.abandoned = s.abandoned.Load()
	rep.reclaimed = s.reclaim(warm.Leaked+rep.abandoned) - warm.Leaked
	rep.metrics = since(s.provider.Metrics(), warm)
	rep.peakLive = s.peakLive.Load()
	rep.admitted, rep.rejected = s.admitted.Load(), s.rejected.Load()
	rep.seconds = s.seconds
	rep.limits = liveLimits(s.provider.Policy())
	rep.ledger = ledgerProblems(s.provider)
	runtime.GC()
	rep.after = sampleResources()
	return rep
}

// warmUp runs the workload briefly so that the runtime has the threads
// and heap it will use, then takes the baseline after.
func (s *soak) warmUp() {
	var wg sync.WaitGroup
	for i := 0; i < s.cfg.workers; i++ {
		w := newWorker(s, s.cfg.seed^uint64(i+1))
		w.abandonRate = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(200 * time.Millisecond)
			for time.Now().Before(deadline) {
				w.once()
			}
			w.releaseAll()
		}()
	}
	wg.Wait()
	s.admitted.Store(0)
	s.rejected.Store(0)
	s.peakLive.Store(0)
	runtime.GC()
}

func (s *soak) publish(seq uint64, cpu, mem float64) {
	_ = s.load.Publish(core.LoadSample{Sequence: seq, ObservedAt: time.Now(), CPUPressure: cpu, MemoryPressure: mem})
}

// sampler is the trusted load sampler: a fresh sample every 5ms, an
// overload flip of 100ms every second, and now and then a malformed
// sample that fails admission closed until the next good one.
func (s *soak) sampler() {
	rng := rand.New(rand.NewPCG(s.cfg.seed, 1))
	seq := uint64(1)
	start := time.Now()
	for !s.stop.Load() {
		time.Sleep(5 * time.Millisecond)
		seq++
		cpu := 0.2 + 0.3*rng.Float64()
		if time.Since(start)%time.Second < 100*time.Millisecond {
			cpu = 0.95
		}
		if rng.IntN(200) == 0 {
			_ = s.load.Publish(core.LoadSample{Sequence: seq, ObservedAt: time.Now(), CPUPressure: math.NaN()})
			continue
		}
		s.publish(seq, cpu, 0.3+0.2*rng.Float64())
	}
	s.publish(seq+1, 0.1, 0.1)
}

// deployer replaces a random deployment every 50ms, so that workers admit
// under held pins whose deployments were replaced.
func (s *soak) deployer() {
	rng := rand.New(rand.NewPCG(s.cfg.seed, 2))
	for !s.stop.Load() {
		time.Sleep(50 * time.Millisecond)
		d := s.file.Deployments[rng.IntN(len(s.file.Deployments))]
		if _, err := s.catalog.Deploy(d); err == nil {
			s.pushPin(s.catalog.Pin())
		}
	}
}

func (s *soak) progress(start time.Time) {
	deadline := start.Add(s.cfg.duration)
	var lastAdmitted, lastRejected int64
	for tick := 1; ; tick++ {
		next := start.Add(time.Duration(tick) * time.Second)
		if next.After(deadline) {
			time.Sleep(time.Until(deadline))
			return
		}
		time.Sleep(time.Until(next))
		a, r := s.admitted.Load(), s.rejected.Load()
		sec := second{tick: tick, admitted: a - lastAdmitted, rejected: r - lastRejected, live: s.provider.NodeSnapshot().Live}
		s.seconds = append(s.seconds, sec)
		fmt.Fprintf(s.out, "t=%3ds admitted=%d (+%d/s) rejected=%d (+%d/s) live=%d generation=%d\n",
			tick, a, sec.admitted, r, sec.rejected, sec.live, s.catalog.Generation())
		lastAdmitted, lastRejected = a, r
	}
}

// reclaim collects until every abandoned permit's reservation came back
// (or five seconds pass) and returns how many the GC reclaimed.
func (s *soak) reclaim(abandoned int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		if s.provider.Metrics().Leaked >= abandoned {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.provider.Metrics().Leaked
}

// since is the counters' growth from an earlier reading.
func since(now, earlier core.Metrics) core.Metrics {
	d := core.Metrics{Admitted: now.Admitted - earlier.Admitted, Leaked: now.Leaked - earlier.Leaked,
		Rejected: make([]core.RejectionCount, len(now.Rejected))}
	for i, r := range now.Rejected {
		d.Rejected[i] = core.RejectionCount{Err: r.Err, Count: r.Count - earlier.Rejected[i].Count}
	}
	return d
}

// ledgerProblems lists every scope whose counters are not back to zero,
// and a live table that still holds entries.
func ledgerProblems(p *core.LocalQuotaProvider) []string {
	out := p.Usage().Held()
	if n := p.LiveReservations(); n != 0 {
		out = append(out, fmt.Sprintf("live table: %d entries", n))
	}
	return out
}

type resources struct {
	goroutines int
	counts     linuxtest.Counts
	countsErr  error
	heapInuse  uint64
}

func sampleResources() resources {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	c, err := linuxtest.Self()
	return resources{goroutines: runtime.NumGoroutine(), counts: c, countsErr: err, heapInuse: ms.HeapInuse}
}
