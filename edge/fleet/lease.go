package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
