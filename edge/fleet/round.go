package fleet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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

// view is a tenant's keys as read at one revision.
type view struct {
	revision      int64 // of the read
	limitRevision int64 // the limit key's mod revision
	limit         int64
	own           sliceValue // this node's slice, when ownFound
	ownFound      bool
	others        int64  // the sum of the other nodes' slices
	nodes         []node // the other nodes' slices
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
	v, ok := b.read(rctx, t, lease, gen)
	if !ok {
		return true
	}

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

	has := v.own.Has
	need := b.params.need(live, has, v.limit, short)
	ahead := b.params.ahead(live, short)
	nodes := append(v.nodes, node{id: b.cfg.NodeID, sliceValue: sliceValue{Has: has, Wants: need}})
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].id < nodes[j].id })
	needs := make([]int64, len(nodes))
	self := 0
	for i, n := range nodes {
		needs[i] = n.Wants
		if n.id == b.cfg.NodeID {
			self = i
		}
	}
	entitled := b.params.entitled(v.limit, needs, self)
	admit := decide(has, need, ahead, entitled, v.limit-v.others-has)
	hold := admit
	if admit < has {
		// Stop admitting above the smaller slice before etcd hears of
		// it, then hold in etcd no less than what is live by now: only
		// idle capacity returns, and new work waits until usage falls.
		b.mu.Lock()
		if gen == b.gen {
			b.publishLocked(t, min(admit, t.published))
		}
		b.mu.Unlock()
		hold = min(max(admit, b.cfg.Usage.Live(t.name)), has)
	}

	// A stated need is rewritten only when it moved by more than the
	// margin, so a live count that wobbles does not write every round.
	wantMoved := need != v.own.Wants && (abs(need-v.own.Wants) > ahead || need == 0 || v.own.Wants == 0)
	if hold == has && !wantMoved && (v.ownFound || hold == 0) {
		b.settle(t, gen, has, admit)
		return true
	}
	want := need
	if !wantMoved && v.ownFound {
		want = v.own.Wants
	}
	if hold == 0 && want == 0 && !v.ownFound {
		b.settle(t, gen, 0, 0)
		return true
	}
	return b.write(rctx, t, lease, gen, v, sliceValue{Has: hold, Wants: want}, admit)
}

// read reads t's limit and slices at one revision. It reports false when
// the round ends there: etcd failed, or a value makes t fail closed.
func (b *Broker) read(ctx context.Context, t *tenantState, lease clientv3.LeaseID, gen uint64) (view, bool) {
	b.metrics.request(opRead)
	resp, err := b.cfg.Client.Txn(ctx).Then(
		clientv3.OpGet(t.limitKey),
		clientv3.OpGet(t.slicePrefix, clientv3.WithPrefix(), clientv3.WithLimit(int64(b.cfg.MaxNodes)+1)),
	).Commit()
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			b.etcdFailed(opRead, err)
		}
		return view{}, false
	}
	b.etcdAnswered()
	v := view{revision: resp.Header.Revision}
	limitRange, sliceRange := resp.Responses[0].GetResponseRange(), resp.Responses[1].GetResponseRange()
	if len(limitRange.Kvs) == 0 {
		b.failClosed(t, gen, fmt.Errorf("%w for tenant %q: key %q is absent", ErrNoLimit, t.name, t.limitKey))
		return view{}, false
	}
	v.limitRevision = limitRange.Kvs[0].ModRevision
	if v.limit, err = decodeLimit(t.limitKey, limitRange.Kvs[0].Value); err != nil {
		b.failClosed(t, gen, err)
		return view{}, false
	}
	if len(sliceRange.Kvs) > b.cfg.MaxNodes || sliceRange.More {
		b.failClosed(t, gen, fmt.Errorf("%w: prefix %q holds more than %d keys", ErrTooManySlices, t.slicePrefix, b.cfg.MaxNodes))
		return view{}, false
	}
	v.nodes = make([]node, 0, len(sliceRange.Kvs)+1)
	for _, kv := range sliceRange.Kvs {
		key := string(kv.Key)
		s, err := decodeSlice(key, kv.Value)
		if err != nil {
			b.failClosed(t, gen, err)
			return view{}, false
		}
		id := strings.TrimPrefix(key, t.slicePrefix)
		if id != b.cfg.NodeID {
			v.others += s.Has
			v.nodes = append(v.nodes, node{id: id, sliceValue: s})
			continue
		}
		if clientv3.LeaseID(kv.Lease) != lease {
			b.failClosed(t, gen, fmt.Errorf("%w: key %q is held under lease %x, not this broker's %x", ErrNodeIDInUse, key, kv.Lease, int64(lease)))
			return view{}, false
		}
		v.own, v.ownFound = s, true
	}
	b.metrics.limit.WithLabelValues(t.name).Set(float64(v.limit))
	b.mu.Lock()
	t.limit = v.limit
	b.mu.Unlock()
	return v, true
}

// write makes s this node's slice of t, or deletes the slice when s is
// all zero, and then admits under admit (at most s.Has), in a transaction that holds only while no slice of t and not
// its limit changed since v was read. It reports false only when that
// comparison failed.
func (b *Broker) write(ctx context.Context, t *tenantState, lease clientv3.LeaseID, gen uint64, v view, s sliceValue, admit int64) bool {
	op := clientv3.OpPut(t.ownKey, encodeSlice(s), clientv3.WithLease(lease))
	if s == (sliceValue{}) {
		op = clientv3.OpDelete(t.ownKey)
	}
	b.metrics.request(opTxn)
	txn, err := b.cfg.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(t.slicePrefix).WithPrefix(), "<", v.revision+1),
		clientv3.Compare(clientv3.ModRevision(t.limitKey), "=", v.limitRevision),
	).Then(op).Commit()
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		b.metrics.failure(opTxn)
		b.etcdAnswered()
		b.leaseLost(lease)
		return true
	case err != nil:
		if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
			b.etcdFailed(opTxn, err)
		}
		return true
	}
	b.etcdAnswered()
	if !txn.Succeeded {
		return false
	}
	b.settle(t, gen, s.Has, admit)
	return true
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
