package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Broker holds this node's slices of the fleet-limited tenants' limits in
// etcd and publishes them, each with a local deadline, into a [Sink].
// See the package documentation for the design and docs/fleet.md for the
// algorithm and the guarantee.
//
// The configuration, the tenants' keys and the metrics never change
// after [New]; mu guards the lease, its renewal, every tenant's slice and
// the state last logged, and serializes the calls into the sink.
type Broker struct {
	cfg     Config
	params  shareParams
	tenants []*tenantState
	metrics *Metrics
	started atomic.Bool // set by the first Run

	mu        sync.Mutex
	lease     clientv3.LeaseID // guarded by mu; 0: none
	gen       uint64           // guarded by mu; changes with every lease gained or lost
	expiresBy time.Time        // guarded by mu; send time of the last grant or keep-alive that succeeded, plus its TTL
	failing   map[string]bool  // guarded by mu; the kinds of failure logged since etcd last answered
}

// tenantState is one fleet-limited tenant. Its keys and margin never
// change; the rest is guarded by Broker.mu.
type tenantState struct {
	name        string
	limitKey    string
	slicePrefix string
	ownKey      string
	margin      time.Duration // MaxGrant + Slack: the local deadline's lead over the lease's expiry

	has         int64  // this node's slice in etcd under the current lease
	published   int64  // the slice last published into the sink
	lastRefused uint64 // Usage.Refused at the last round
	problem     string // the problem last logged, "" none
	withdrawn   bool   // failing closed for problem
	limit       int64  // the limit as last read; -1 before the first read
}

// New checks cfg and returns a broker that has not started: [Broker.Run]
// starts it. Every tenant's slice is 0 until Run gets a lease and a
// round grants one.
func New(cfg Config) (*Broker, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{cfg: c, params: shareParams{aheadFraction: c.AheadFraction, minAhead: c.MinAhead}, failing: map[string]bool{}}
	names := make([]string, 0, len(c.Tenants))
	for _, t := range c.Tenants {
		names = append(names, t.Name)
		b.tenants = append(b.tenants, &tenantState{
			name:        t.Name,
			limitKey:    c.Prefix + "limits/" + t.Name,
			slicePrefix: c.Prefix + "slices/" + t.Name + "/",
			ownKey:      c.Prefix + "slices/" + t.Name + "/" + c.NodeID,
			margin:      t.MaxGrant + c.Slack,
			limit:       -1,
		})
	}
	b.metrics = newMetrics(names)
	return b, nil
}

// LimitKey is the etcd key that holds tenant's fleet limit under cfg's
// prefix (the default when empty): a decimal integer.
func LimitKey(prefix, tenant string) string {
	if prefix == "" {
		prefix = "/latent/fleet/"
	}
	return prefix + "limits/" + tenant
}

// Run keeps the lease and the slices until ctx ends, then withdraws every
// slice from the sink and, once no fleet activation is live (waiting at
// most the longest margin), revokes the lease so the slices return at
// once; with activations still live it leaves the lease to expire. Run
// returns after both. A second call is a bug in the embedding program and
// panics.
func (b *Broker) Run(ctx context.Context) {
	if !b.started.CompareAndSwap(false, true) {
		panic("fleet: Broker.Run called twice")
	}
	b.mu.Lock()
	for _, t := range b.tenants {
		b.publishLocked(t, 0)
	}
	b.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); b.leaseLoop(ctx) }()
	go func() { defer wg.Done(); b.allocLoop(ctx) }()
	wg.Wait()
	b.shutdown()
}

func (b *Broker) shutdown() {
	b.mu.Lock()
	lease := b.lease
	b.lease, b.gen, b.expiresBy = 0, b.gen+1, time.Time{}
	var longest time.Duration
	for _, t := range b.tenants {
		b.publishLocked(t, 0)
		longest = max(longest, t.margin)
	}
	b.mu.Unlock()
	if lease == 0 {
		return
	}
	for until := time.Now().Add(longest); ; time.Sleep(10 * time.Millisecond) {
		if b.liveTotal() == 0 {
			break
		}
		if time.Now().After(until) {
			b.cfg.Logger.Warn("fleet: activations still live at shutdown; the lease is left to expire", "node", b.cfg.NodeID)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	b.metrics.request(opRevoke)
	if _, err := b.cfg.Client.Revoke(ctx, lease); err != nil {
		b.metrics.failure(opRevoke)
		b.cfg.Logger.Warn("fleet: the lease could not be revoked; the slices return when it expires", "node", b.cfg.NodeID, "error", err)
	}
}

func (b *Broker) liveTotal() int64 {
	var n int64
	for _, t := range b.tenants {
		n += max(b.cfg.Usage.Live(t.name), 0)
	}
	return n
}

// publishLocked publishes slice for t with the current local deadline:
// none without a lease or while t fails closed, so admission answers
// unavailable; a slice of 0 under a deadline is a full slice, whose
// refusals state a want. b.mu is held.
func (b *Broker) publishLocked(t *tenantState, slice int64) {
	t.published = slice
	var until time.Time // zero: withdrawn, admission answers unavailable
	if b.lease != 0 && !t.withdrawn {
		until = b.expiresBy.Add(-t.margin)
	}
	b.cfg.Sink.Publish(t.name, slice, until)
	b.metrics.slice.WithLabelValues(t.name).Set(float64(slice))
}

// settle records has as t's slice in etcd, publishes admit (at most has)
// as the slice to admit under, and clears a problem logged before.
func (b *Broker) settle(t *tenantState, gen uint64, has, admit int64) {
	b.mu.Lock()
	if gen != b.gen {
		b.mu.Unlock()
		return
	}
	t.has = has
	t.withdrawn = false
	b.publishLocked(t, min(admit, has))
	b.metrics.held.WithLabelValues(t.name).Set(float64(has))
	b.metrics.failClosed.WithLabelValues(t.name).Set(0)
	cleared := t.problem
	t.problem = ""
	b.mu.Unlock()
	if cleared != "" {
		b.cfg.Logger.Info("fleet: tenant's slice is back", "tenant", t.name, "node", b.cfg.NodeID, "was", cleared)
	}
}

// failClosed withdraws t's slice from the sink for problem and logs the
// problem when it differs from the last one; etcd is left as it is, so
// the slice there still covers what is live.
func (b *Broker) failClosed(t *tenantState, gen uint64, problem error) {
	b.mu.Lock()
	t.withdrawn = true
	if gen == b.gen {
		b.publishLocked(t, 0)
	}
	b.metrics.failClosed.WithLabelValues(t.name).Set(1)
	changed := t.problem != problem.Error()
	t.problem = problem.Error()
	b.mu.Unlock()
	if changed {
		b.cfg.Logger.Error("fleet: tenant fails closed", "tenant", t.name, "node", b.cfg.NodeID, "error", problem)
	}
}

// TenantStatus is one fleet-limited tenant as the broker last saw it, for
// operators (a status page).
type TenantStatus struct {
	Name string
	// Limit is the fleet limit as last read from etcd; -1 before the
	// first read that decoded.
	Limit int64
	// Held is this node's slice in etcd under its current lease, as last
	// written; Published the slice last published into the sink.
	Held, Published int64
	// Problem is why the tenant fails closed on this node, "" when it
	// does not for a value in etcd.
	Problem string
}

// Status reports every configured tenant, in the configuration's order.
func (b *Broker) Status() []TenantStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]TenantStatus, 0, len(b.tenants))
	for _, t := range b.tenants {
		out = append(out, TenantStatus{Name: t.name, Limit: t.limit, Held: t.has, Published: t.published, Problem: t.problem})
	}
	return out
}
