package latentd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/edge/metrics"
	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/policy"
)

// Node is one latentd: the catalog, the quota provider, the pipeline that
// runs admitted guests, the load sampler and the HTTP server in front of
// them. Build it with New, serve with Serve, end it with Shutdown.
//
// Fields up to adminMu never change after New, but catalogOpen, which is
// atomic, and shutdownErr, written once inside shutdownOnce. adminMu
// guards no field: it serializes deploys and deletes, and each …Locked
// method of Node is called with it held, so views are published in
// generation order; the current view is an atomic pointer that
// invocations load without a lock. The fields after adminMu say how they
// are shared.
type Node struct {
	cfg      Config
	provider *core.LocalQuotaProvider
	// settings are the provider's node settings, which every invocation
	// reads: the provider's policy never changes after New.
	settings policy.NodeSettings
	catalog  *catalog.Catalog
	load     *core.NodeLoadState
	pipe     *pipeline.Pipeline
	sampler  *loadsampler.Sampler
	registry *prometheus.Registry
	base     *core.AdmissionController
	server   *http.Server
	handler  http.Handler
	// allowedHosts are Config.AllowedHosts for the Host rule (host.go).
	allowedHosts map[string]bool

	// hardStop ends every activation's context when the grace period
	// of Shutdown is over.
	hardStop     context.Context
	hardStopNow  context.CancelFunc
	samplerStop  context.CancelFunc
	samplerDone  chan struct{}
	inflight     sync.WaitGroup
	catalogOpen  atomic.Bool
	shutdownOnce sync.Once
	shutdownErr  error

	adminMu sync.Mutex
	view    atomic.Pointer[view] // written under adminMu
	// status is what the status page keeps: recent outcomes and
	// rejection samples. Set by New (routes), never changed; it has its
	// own lock.
	status *statusState
	// tokens is the token set in force: cfg.Tokens until SetTokens
	// replaces it (a reload); atomic.
	tokens atomic.Pointer[Tokens]
	// reloads counts SetTokens and failed reloads, by result.
	reloads *prometheus.CounterVec
	// rec records decisions (Config.RecordPath); nil records nothing.
	rec *recorder
	// conns caps the connections of every listener Serve serves.
	conns *connLimiter
	// serverLog takes the HTTP server's own log lines (serverlog.go).
	serverLog *serverLog
	// unavailable holds the releases of the stored deployments that the
	// module limits refused at start (see prepareAll): they are answered
	// as not available. Written by New before the node serves, only read
	// after.
	unavailable map[releaseKey]bool
	// fleetTenants are the policy's fleet-limited tenants; fleet is their
	// broker (nil without Config.Fleet), run by New and stopped by
	// Shutdown through fleetStop.
	fleetTenants []string
	fleet        *fleet.Broker
	fleetStop    context.CancelFunc
	fleetDone    chan struct{}
}

// releaseKey names one release of one deployment.
type releaseKey struct{ tenant, service, release string }

// answerAfterInterrupt is how long Shutdown waits, once it has
// interrupted the guests, for their handlers to answer.
const answerAfterInterrupt = 2 * time.Second

// view is one pinned catalog generation and the controller over it.
type view struct {
	pin        *catalog.Pin
	controller *core.AdmissionController
}

// New builds a node: it opens (or creates) the catalog, prepares every
// deployed artifact, starts the pipeline and the load sampler (with one
// sample taken before it returns, so the node is ready at once), and
// builds the HTTP server. On error everything it started is stopped
// again, and the error is returned.
func New(cfg Config) (_ *Node, err error) {
	if cfg.Policy == nil {
		return nil, errors.New("latentd: a policy is required")
	}
	var rec *recorder
	var provider *core.LocalQuotaProvider
	if cfg.RecordPath != "" {
		rec = &recorder{start: time.Now()}
		provider, err = core.NewRecordingProvider(cfg.Policy, rec)
	} else {
		provider, err = core.NewLocalQuotaProvider(cfg.Policy)
	}
	if err != nil {
		return nil, fmt.Errorf("latentd: policy: %w", err)
	}
	settings := provider.Policy().Node()
	if err := cfg.setDefaults(settings.BudgetCeiling.WallTime); err != nil {
		return nil, err
	}
	if err := checkCallStacks(cfg.Policy); err != nil {
		return nil, err
	}
	// n is not the named result: a failing return nils that, and the
	// undo steps below still need the node they undo.
	n := &Node{cfg: cfg, provider: provider, settings: settings, allowedHosts: allowedHostSet(cfg.AllowedHosts), rec: rec}
	n.tokens.Store(cfg.Tokens)
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	if rec != nil {
		rec.provider = provider
		if err := rec.open(cfg); err != nil {
			return nil, err
		}
		undo = append(undo, func() { _ = rec.w.Close() })
	}

	if n.catalog, err = openCatalog(cfg); err != nil {
		return nil, err
	}
	n.catalogOpen.Store(true)
	undo = append(undo, func() { _ = n.catalog.Close() })
	pin := n.catalog.Pin()
	if rec != nil {
		if err := rec.catalog(n.catalog, pin); err != nil {
			return nil, err
		}
	}
	if err := n.prepareAll(pin); err != nil {
		return nil, err
	}

	if n.pipe, err = pipeline.New(provider, pipeline.Config{Backends: cfg.Guests.Backends()}); err != nil {
		return nil, fmt.Errorf("latentd: pipeline: %w", err)
	}
	undo = append(undo, n.pipe.Close)

	n.load = core.NewNodeLoadState(settings.Overload.MaximumObservationAge, nil)
	var target loadsampler.Target = n.load
	if rec != nil {
		rec.load = n.load
		target = recordingTarget{state: n.load, rec: rec}
	}
	n.sampler, err = loadsampler.New(loadsampler.Config{
		Files:                 cfg.Load,
		Target:                target,
		Interval:              cfg.SampleInterval,
		MaximumObservationAge: settings.Overload.MaximumObservationAge,
		QueueDelay:            n.pipe.QueueDelay,
		Logger:                cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("latentd: load sampler: %w", err)
	}
	if err := n.sampler.Sample(); err != nil {
		return nil, fmt.Errorf("latentd: load sampler: %w", err)
	}
	samplerCtx, samplerStop := context.WithCancel(context.Background())
	n.samplerStop, n.samplerDone = samplerStop, make(chan struct{})
	go func() { defer close(n.samplerDone); n.sampler.Run(samplerCtx) }()
	undo = append(undo, n.stopSampler)

	n.registry = prometheus.NewRegistry()
	n.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_node_reloads_total",
		Help: "Reloads of the token file and the TLS certificate (SIGHUP), by result."}, []string{"result"})
	n.reloads.WithLabelValues("ok")
	n.reloads.WithLabelValues("failed")
	if err := n.registry.Register(n.reloads); err != nil {
		return nil, fmt.Errorf("latentd: metrics: %w", err)
	}
	if n.conns, err = newConnLimiter(cfg.MaxConnections, cfg.MaxConnectionsPerClient, n.registry); err != nil {
		return nil, fmt.Errorf("latentd: metrics: %w", err)
	}
	if n.serverLog, err = newServerLog(cfg.Logger, n.registry); err != nil {
		return nil, fmt.Errorf("latentd: metrics: %w", err)
	}
	if rec != nil {
		if err := rec.recordMetrics(n.registry); err != nil {
			return nil, fmt.Errorf("latentd: metrics: %w", err)
		}
	}
	collector, err := metrics.New(metrics.Config{Provider: provider, Load: n.load, Runner: n.pipe.Runner(), Scheduler: n.pipe.Scheduler()})
	if err != nil {
		return nil, fmt.Errorf("latentd: metrics: %w", err)
	}
	if err := n.registry.Register(collector); err != nil {
		return nil, fmt.Errorf("latentd: metrics: %w", err)
	}

	if err := n.startFleet(); err != nil {
		return nil, err
	}
	undo = append(undo, n.stopFleet)

	n.base = provider.Controller(core.ControllerConfig{Source: pin, Load: n.load})
	n.view.Store(&view{pin: pin, controller: n.base})
	n.hardStop, n.hardStopNow = context.WithCancel(context.Background())
	n.handler = n.routes()
	n.server = &http.Server{
		Handler:           n.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          n.serverLog.errorLog(),
		TLSConfig:         cfg.TLSConfig,
	}
	return n, nil
}

// openCatalog opens the store, creates one in a directory without one, or
// builds the in-memory catalog.
func openCatalog(cfg Config) (*catalog.Catalog, error) {
	if cfg.StoreDir == "" {
		c := catalog.New(cfg.Capacity)
		for _, d := range cfg.Deployments {
			if _, err := c.Deploy(d); err != nil {
				return nil, fmt.Errorf("latentd: catalog: deployment %s/%s: %w", d.Tenant, d.Service, err)
			}
		}
		return c, nil
	}
	_, statErr := os.Stat(filepath.Join(cfg.StoreDir, catalog.StoreFileName))
	if errors.Is(statErr, os.ErrNotExist) {
		c, err := catalog.Create(cfg.StoreDir, cfg.Capacity)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, catalog.ErrStoreExists) {
			return nil, fmt.Errorf("latentd: catalog store: %w", err)
		}
	}
	c, err := catalog.Open(cfg.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("latentd: catalog store: %w", err)
	}
	return c, nil
}

// prepareAll hands every deployment pin holds to the guest runtime. A
// deployment whose artifact the module limits refuse (guest's
// ErrModuleRefused) is logged, naming it and the rule, and left out: its
// releases are unavailable. Any other failure fails the start.
func (n *Node) prepareAll(pin *catalog.Pin) error {
	for _, key := range pin.Deployments() {
		d, _, ok := pin.Deployment(key.Tenant, key.Service)
		if !ok {
			continue
		}
		p, err := n.cfg.Guests.Prepare(context.Background(), d)
		if errors.Is(err, guest.ErrModuleRefused) {
			// Stored before the node's module limits refused it: the node
			// serves everything else, and this deployment's releases are
			// answered as not available until it is redeployed.
			n.cfg.Logger.Error("latentd: stored deployment not available: a module limit refuses its artifact",
				"tenant", key.Tenant, "service", key.Service, "error", err.Error())
			if n.unavailable == nil {
				n.unavailable = map[releaseKey]bool{}
			}
			for _, route := range d.Routes {
				for _, rev := range route.Revisions {
					n.unavailable[releaseKey{key.Tenant, key.Service, catalog.ReleaseID(rev.Release)}] = true
				}
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("latentd: deployment %s/%s: %w", key.Tenant, key.Service, err)
		}
		previous, err := p.Commit()
		if err != nil {
			p.Discard()
			return fmt.Errorf("latentd: deployment %s/%s: %w", key.Tenant, key.Service, err)
		}
		previous.Discard()
	}
	return nil
}

// Handler is the node's HTTP handler, for a server of the caller's own.
func (n *Node) Handler() http.Handler { return n.handler }

// Provider is the node's quota provider.
func (n *Node) Provider() *core.LocalQuotaProvider { return n.provider }

// Pipeline is the node's pipeline.
func (n *Node) Pipeline() *pipeline.Pipeline { return n.pipe }

// Sampler is the node's load sampler.
func (n *Node) Sampler() *loadsampler.Sampler { return n.sampler }

// Serve accepts connections on l until Shutdown, within the connection
// caps (Config.MaxConnections); it returns http.ErrServerClosed after a
// Shutdown.
func (n *Node) Serve(l net.Listener) error {
	l = limitListener{Listener: l, limiter: n.conns}
	if n.server.TLSConfig != nil {
		// The certificate comes from TLSConfig (GetCertificate or
		// Certificates); ServeTLS offers HTTP/2 as well.
		return n.server.ServeTLS(l, "", "")
	}
	return n.server.Serve(l)
}

// SetTokens puts a new token set in force for every request that starts
// after it; requests and activations already running are untouched.
func (n *Node) SetTokens(t *Tokens) { n.tokens.Store(t) }

// ReloadDone counts one reload (of the token file, the certificate or
// both) by its result in latent_node_reloads_total: ok, or failed when
// something was refused and kept what it would have replaced.
func (n *Node) ReloadDone(ok bool) {
	result := "failed"
	if ok {
		result = "ok"
	}
	n.reloads.WithLabelValues(result).Inc()
}

// Shutdown stops accepting, lets running activations finish within the
// grace period (then interrupts them), waits for every handler and
// activation, releases every permit, stops the fleet broker (which
// revokes its lease, returning its slices), stops the sampler and closes the
// guest runtime, the catalog and, last, the trace (Config.RecordPath).
// It is idempotent; an error names what did not end cleanly.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(ctx) })
	return n.shutdownErr
}

func (n *Node) shutdown(ctx context.Context) error {
	var errs []error
	graceCtx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownGrace)
	err := n.server.Shutdown(graceCtx)
	cancel()
	if err != nil {
		// Interrupt the guests, give their handlers a moment to answer
		// (Latent-Outcome: canceled), then close whatever is left.
		n.cfg.Logger.Warn("latentd: grace period over; interrupting running activations")
		n.hardStopNow()
		answerCtx, cancel := context.WithTimeout(ctx, answerAfterInterrupt)
		_ = n.server.Shutdown(answerCtx)
		cancel()
		_ = n.server.Close()
	}
	n.inflight.Wait()
	n.hardStopNow()
	n.pipe.Close()
	// No activation is live: the broker withdraws the slices and
	// revokes its lease at once, so they return to the fleet now.
	n.stopFleet()
	n.stopSampler()
	if err := n.cfg.Guests.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("latentd: guests: %w", err))
	}
	n.catalogOpen.Store(false)
	if err := n.catalog.Close(); err != nil {
		errs = append(errs, fmt.Errorf("latentd: catalog: %w", err))
	}
	if n.rec != nil {
		// Last: no handler runs, no permit is held and the sampler has
		// stopped, so every decision, move and sample is in the queue.
		if err := n.rec.w.Close(); err != nil {
			errs = append(errs, fmt.Errorf("latentd: record: %w", err))
		}
	}
	if live := n.provider.LiveReservations(); live != 0 {
		errs = append(errs, fmt.Errorf("latentd: %d reservations still live after shutdown", live))
	}
	return errors.Join(errs...)
}

func (n *Node) stopSampler() {
	if n.samplerStop != nil {
		n.samplerStop()
		<-n.samplerDone
		n.samplerStop = nil
	}
}
