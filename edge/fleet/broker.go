package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
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
// returns after both. It may be called once.
func (b *Broker) Run(ctx context.Context) {
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

// leaseLoop gets a lease and keeps it alive. A keep-alive that succeeds
// moves every slice's local deadline to the time its request was sent
// plus the TTL the server granted, less the tenant's margin: the server
// renewed the lease no earlier than it received the request, so its
// expiry is at least that late.
func (b *Broker) leaseLoop(ctx context.Context) {
	grantBackoff := backoff{base: 100 * time.Millisecond, cap: b.cfg.BackoffMax}
	aliveBackoff := backoff{base: 100 * time.Millisecond, cap: b.cfg.KeepAlive}
	wait := time.Duration(0)
	for {
		if !sleep(ctx, wait) {
			return
		}
		b.mu.Lock()
		lease := b.lease
		b.mu.Unlock()
		if lease == 0 {
			id, expiresBy, err := b.grant(ctx)
			if err != nil {
				wait = grantBackoff.next()
				continue
			}
			grantBackoff.reset()
			b.mu.Lock()
			b.lease, b.gen, b.expiresBy = id, b.gen+1, expiresBy
			for _, t := range b.tenants {
				t.has = 0
				b.publishLocked(t, 0)
			}
			b.mu.Unlock()
			wait = b.cfg.KeepAlive
			continue
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
		b.metrics.request(opKeepAlive)
		resp, err := b.cfg.Client.KeepAliveOnce(rctx, lease)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			b.metrics.failure(opKeepAlive)
			b.etcdAnswered()
			b.leaseLost(lease)
			wait = 0
		case err != nil:
			b.etcdFailed(opKeepAlive, err)
			wait = aliveBackoff.next()
		default:
			b.etcdAnswered()
			aliveBackoff.reset()
			b.mu.Lock()
			if b.lease == lease {
				b.expiresBy = sent.Add(time.Duration(resp.TTL) * time.Second)
				for _, t := range b.tenants {
					b.publishLocked(t, t.published)
				}
			}
			b.mu.Unlock()
			wait = b.cfg.KeepAlive
		}
	}
}

func (b *Broker) grant(ctx context.Context) (clientv3.LeaseID, time.Time, error) {
	sent := time.Now()
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	b.metrics.request(opGrant)
	resp, err := b.cfg.Client.Grant(rctx, int64(b.cfg.TTL/time.Second))
	if err == nil && resp.Error != "" {
		err = errors.New(resp.Error)
	}
	if err != nil {
		if ctx.Err() == nil {
			b.etcdFailed(opGrant, err)
		}
		return 0, time.Time{}, err
	}
	b.etcdAnswered()
	return resp.ID, sent.Add(time.Duration(resp.TTL) * time.Second), nil
}

// leaseLost withdraws every slice held under lease, which etcd no longer
// has: its keys are gone, and the lease loop gets a new one.
func (b *Broker) leaseLost(lease clientv3.LeaseID) {
	b.mu.Lock()
	lost := b.lease == lease
	if lost {
		b.lease, b.gen, b.expiresBy = 0, b.gen+1, time.Time{}
		for _, t := range b.tenants {
			t.has = 0
			b.publishLocked(t, 0)
			b.metrics.held.WithLabelValues(t.name).Set(0)
		}
	}
	b.mu.Unlock()
	if lost {
		b.metrics.leaseLosses.Inc()
		b.cfg.Logger.Warn("fleet: the etcd lease expired; the slices are withdrawn and a new lease is requested", "node", b.cfg.NodeID, "lease", fmt.Sprintf("%x", int64(lease)))
	}
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

func (b *Broker) allocLoop(ctx context.Context) {
	tick := time.NewTicker(b.cfg.Refresh)
	defer tick.Stop()
	for {
		for _, t := range b.tenants {
			b.round(ctx, t)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxAttempts bounds the attempts of one round when another node's
// transaction wins the race: the next round tries again.
const maxAttempts = 3

func (b *Broker) round(ctx context.Context, t *tenantState) {
	for range maxAttempts {
		if ctx.Err() != nil || b.tryRound(ctx, t) {
			return
		}
		b.metrics.conflicts.Inc()
	}
}

// node is one slice of a tenant as read from etcd.
type node struct {
	id string
	sliceValue
}

// tryRound reads the tenant's limit and slices at one revision, decides
// this node's next slice and writes it in a transaction that compares
// the revision: it reports false only when another change won the race.
func (b *Broker) tryRound(ctx context.Context, t *tenantState) bool {
	b.mu.Lock()
	lease, gen := b.lease, b.gen
	b.mu.Unlock()
	if lease == 0 {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	b.metrics.request(opRead)
	resp, err := b.cfg.Client.Txn(rctx).Then(
		clientv3.OpGet(t.limitKey),
		clientv3.OpGet(t.slicePrefix, clientv3.WithPrefix(), clientv3.WithLimit(int64(b.cfg.MaxNodes)+1)),
	).Commit()
	if err != nil {
		if ctx.Err() == nil {
			b.etcdFailed(opRead, err)
		}
		return true
	}
	b.etcdAnswered()
	revision := resp.Header.Revision
	limitRange, sliceRange := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange()
	if len(limitRange.Kvs) == 0 {
		b.failClosed(t, gen, fmt.Errorf("%w for tenant %q: key %q is absent", ErrNoLimit, t.name, t.limitKey))
		return true
	}
	limitKV := limitRange.Kvs[0]
	limit, err := decodeLimit(t.limitKey, limitKV.Value)
	if err != nil {
		b.failClosed(t, gen, err)
		return true
	}
	if len(sliceRange.Kvs) > b.cfg.MaxNodes || sliceRange.More {
		b.failClosed(t, gen, fmt.Errorf("%w: prefix %q holds more than %d keys", ErrTooManySlices, t.slicePrefix, b.cfg.MaxNodes))
		return true
	}
	nodes := make([]node, 0, len(sliceRange.Kvs)+1)
	var own sliceValue
	ownFound := false
	var others int64
	for _, kv := range sliceRange.Kvs {
		key := string(kv.Key)
		v, err := decodeSlice(key, kv.Value)
		if err != nil {
			b.failClosed(t, gen, err)
			return true
		}
		id := strings.TrimPrefix(key, t.slicePrefix)
		if id == b.cfg.NodeID {
			if clientv3.LeaseID(kv.Lease) != lease {
				b.failClosed(t, gen, fmt.Errorf("%w: key %q is held under lease %x, not this broker's %x", ErrNodeIDInUse, key, kv.Lease, int64(lease)))
				return true
			}
			own, ownFound = v, true
			continue
		}
		others += v.Has
		nodes = append(nodes, node{id: id, sliceValue: v})
	}
	b.metrics.limit.WithLabelValues(t.name).Set(float64(limit))

	live := max(b.cfg.Usage.Live(t.name), 0)
	refused := b.cfg.Usage.Refused(t.name)
	b.mu.Lock()
	if gen != b.gen {
		b.mu.Unlock()
		return true
	}
	short := refused != t.lastRefused
	t.lastRefused = refused
	b.mu.Unlock()

	has := own.Has
	need := b.params.need(live, has, limit, short)
	ahead := b.params.ahead(live, short)
	nodes = append(nodes, node{id: b.cfg.NodeID, sliceValue: sliceValue{Has: has, Wants: need}})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].id < nodes[j].id })
	needs := make([]int64, len(nodes))
	self := 0
	for i, n := range nodes {
		needs[i] = n.Wants
		if n.id == b.cfg.NodeID {
			self = i
		}
	}
	entitled := b.params.entitled(limit, needs, self)
	next := decide(has, live, need, ahead, entitled, limit-others-has)

	// A stated need is rewritten only when it moved by more than the
	// margin, so a live count that wobbles does not write every round.
	wantMoved := need != own.Wants && (abs(need-own.Wants) > ahead || need == 0 || own.Wants == 0)
	if next == has && !wantMoved && (ownFound || next == 0) {
		b.settle(t, gen, has)
		return true
	}
	want := need
	if !wantMoved && ownFound {
		want = own.Wants
	}
	if next < has {
		// Stop admitting above the smaller slice before etcd hears of
		// it, then never write less than what is live by now.
		b.mu.Lock()
		if gen == b.gen {
			b.publishLocked(t, min(next, t.published))
		}
		b.mu.Unlock()
		next = min(max(next, b.cfg.Usage.Live(t.name)), has)
	}
	var op clientv3.Op
	switch {
	case next == 0 && want == 0 && !ownFound:
		b.settle(t, gen, 0)
		return true
	case next == 0 && want == 0:
		op = clientv3.OpDelete(t.ownKey)
	default:
		op = clientv3.OpPut(t.ownKey, encodeSlice(sliceValue{Has: next, Wants: want}), clientv3.WithLease(lease))
	}
	b.metrics.request(opTxn)
	txn, err := b.cfg.Client.Txn(rctx).If(
		clientv3.Compare(clientv3.ModRevision(t.slicePrefix).WithPrefix(), "<", revision+1),
		clientv3.Compare(clientv3.ModRevision(t.limitKey), "=", limitKV.ModRevision),
	).Then(op).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		b.metrics.failure(opTxn)
		b.etcdAnswered()
		b.leaseLost(lease)
		return true
	case err != nil:
		if ctx.Err() == nil {
			b.etcdFailed(opTxn, err)
		}
		return true
	}
	b.etcdAnswered()
	if !txn.Succeeded {
		return false
	}
	b.settle(t, gen, next)
	return true
}

// settle records has as t's slice in etcd and publishes it, and clears a
// problem logged before.
func (b *Broker) settle(t *tenantState, gen uint64, has int64) {
	b.mu.Lock()
	if gen != b.gen {
		b.mu.Unlock()
		return
	}
	t.has = has
	t.withdrawn = false
	b.publishLocked(t, has)
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

// etcdFailed counts a failed request and logs it when etcd answered the
// last request, or when this kind of failure is new since it did: one
// line per change of state, however long etcd stays away.
func (b *Broker) etcdFailed(op string, err error) {
	b.metrics.failure(op)
	b.metrics.up.Set(0)
	kind := failureKind(err)
	b.mu.Lock()
	changed := !b.failing[kind]
	b.failing[kind] = true
	b.mu.Unlock()
	if !changed {
		return
	}
	attrs := []any{"node", b.cfg.NodeID, "op", op, "endpoints", strings.Join(b.cfg.Client.Endpoints(), ","), "kind", kind, "error", err}
	if kind == "timeout" {
		if cause := b.diagnose(); cause != "" {
			attrs = append(attrs, "connection", cause)
		}
	}
	b.cfg.Logger.Warn("fleet: etcd request failed", attrs...)
}

// diagnose asks etcd once without waiting for a connection, so that a
// request that timed out waiting for one is logged with why the
// connection fails (refused, a certificate it does not trust). It runs
// only when a failure is logged, at most once per kind and episode.
func (b *Broker) diagnose() string {
	conn := b.cfg.Client.ActiveConnection()
	if conn == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	_, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return err.Error()
	}
	return ""
}

// etcdAnswered logs once that etcd answers again.
func (b *Broker) etcdAnswered() {
	b.metrics.up.Set(1)
	b.mu.Lock()
	var was []string
	for k, on := range b.failing {
		if on {
			was = append(was, k)
			b.failing[k] = false
		}
	}
	b.mu.Unlock()
	if len(was) > 0 {
		sort.Strings(was)
		b.cfg.Logger.Info("fleet: etcd answers again", "node", b.cfg.NodeID, "was", strings.Join(was, ","))
	}
}

// failureKinds are what failureKind returns.
var failureKinds = []string{"timeout", "tls", "unavailable", "closed", "error"}

// failureKind is the class of a failed request, which decides whether it
// is logged again.
func failureKind(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "deadline exceeded"):
		return "timeout"
	case strings.Contains(msg, "certificate") || strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return "tls"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "Unavailable") || strings.Contains(msg, "unavailable"):
		return "unavailable"
	case strings.Contains(msg, "client connection is closing") || errors.Is(err, context.Canceled):
		return "closed"
	}
	return "error"
}

// backoff is an exponential back-off with full jitter above half, capped.
type backoff struct {
	base, cap, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	}
	d := min(b.cur, b.cap)
	b.cur = min(b.cur*2, b.cap)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx ends, reporting whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
