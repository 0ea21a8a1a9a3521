package latentd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"latent.dev/admission/core"
	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/policy"
)

// FleetConfig connects a node's fleet-limited tenants (the policy's fleet
// block) to the fleet broker on etcd (edge/fleet, docs/fleet.md).
type FleetConfig struct {
	// Client is the etcd client; the node does not close it.
	Client *clientv3.Client
	// NodeID names this node's slices in etcd; unique in the fleet.
	NodeID string
	// TTL is the etcd lease's time to live (zero: the broker's default,
	// 10s). KeepAlive and Refresh are the broker's intervals (zero: its
	// defaults, TTL/5 and 1s).
	TTL, KeepAlive, Refresh time.Duration
}

// fleetTenants are the tenants the policy's fleet block marks, in the
// policy's order.
func fleetTenants(p *core.LocalQuotaProvider) []string {
	c := p.Policy()
	var out []string
	for i := range c.NumTenants() {
		if t := c.Tenant(policy.TenantID(i)); t.FleetLimited {
			out = append(out, t.Name)
		}
	}
	return out
}

// startFleet starts the broker for the policy's fleet-limited tenants
// when cfg.Fleet is set: its goroutines belong to the node and end in
// Shutdown (stopFleet). Without cfg.Fleet the tenants are refused
// (fail closed: core refuses a tenant without a published slice), and
// that is logged once here.
func (n *Node) startFleet() error {
	n.fleetTenants = fleetTenants(n.provider)
	if len(n.fleetTenants) == 0 {
		if n.cfg.Fleet != nil {
			n.cfg.Logger.Info("latentd: etcd is configured but the policy marks no fleet-limited tenant; no fleet broker runs")
		}
		return nil
	}
	if n.cfg.Fleet == nil {
		n.cfg.Logger.Warn("latentd: the policy marks fleet-limited tenants but no etcd is configured (-etcd): they will be refused (fleet-unavailable)",
			"tenants", strings.Join(n.fleetTenants, ","))
		return nil
	}
	maxGrant := n.settings.BudgetCeiling.WallTime
	tenants := make([]fleet.Tenant, 0, len(n.fleetTenants))
	for _, name := range n.fleetTenants {
		tenants = append(tenants, fleet.Tenant{Name: name, MaxGrant: maxGrant})
	}
	logger := n.cfg.Logger.With("log", "fleet")
	b, err := fleet.New(fleet.Config{
		Client: n.cfg.Fleet.Client, NodeID: n.cfg.Fleet.NodeID, Tenants: tenants,
		Sink: &fleetSink{p: n.provider, logger: logger, rec: n.rec}, Usage: fleetUsage{n.provider},
		TTL: n.cfg.Fleet.TTL, KeepAlive: n.cfg.Fleet.KeepAlive, Refresh: n.cfg.Fleet.Refresh,
		Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("latentd: fleet (each permit may run up to the policy's wall-time ceiling, %v): %w", maxGrant, err)
	}
	if err := n.registry.Register(b.Collector()); err != nil {
		return fmt.Errorf("latentd: metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.fleet, n.fleetStop, n.fleetDone = b, cancel, make(chan struct{})
	go func() { defer close(n.fleetDone); b.Run(ctx) }()
	n.cfg.Logger.Info("latentd: fleet broker started", "node_id", n.cfg.Fleet.NodeID, "tenants", strings.Join(n.fleetTenants, ","),
		"max_grant", maxGrant.String())
	return nil
}

// stopFleet ends the broker and waits for it: it withdraws every slice,
// and revokes the lease once no fleet activation is live.
func (n *Node) stopFleet() {
	if n.fleetStop != nil {
		n.fleetStop()
		<-n.fleetDone
		n.fleetStop = nil
	}
}

// fleetSink publishes the broker's slices into the provider. On a
// recording node each write is a fleet line whose order is drawn before
// the write (as a load sample's is), numbered per tenant as the provider
// counts its writes, so a replay finds the slice each decision judged.
// The broker calls Publish one tenant at a time under its lock, so
// writes needs no lock of its own.
type fleetSink struct {
	p      *core.LocalQuotaProvider
	logger *slog.Logger
	rec    *recorder         // nil: the node does not record
	writes map[string]uint64 // the provider's writes of each tenant's slice, when recording
}

func (s *fleetSink) Publish(tenant string, slice int64, validUntil time.Time) {
	var order uint64
	if s.rec != nil {
		order = s.rec.provider.NextOrder()
	}
	var err error
	published := !validUntil.IsZero()
	if !published {
		if !s.p.WithdrawFleetSlice(tenant) {
			err = core.ErrFleetSliceRejected
		}
	} else {
		err = s.p.PublishFleetSlice(tenant, slice, validUntil)
	}
	if _, _, _, fleetLimited := s.p.FleetSlice(tenant); s.rec != nil && fleetLimited {
		// Every write of a fleet-limited tenant counts, a refused publish
		// too (it withdraws).
		if s.writes == nil {
			s.writes = map[string]uint64{}
		}
		s.writes[tenant]++
		s.rec.fleetWrote(order, tenant, published && err == nil, slice, validUntil, s.writes[tenant])
	}
	if errors.Is(err, core.ErrFleetSliceRejected) {
		// The tenant fails closed until a slice the provider takes.
		s.logger.Error("latentd: the provider refused a fleet slice; the tenant is refused until the next one",
			"tenant", tenant, "slice", slice, "error", err.Error())
	}
}

// fleetUsage is what the broker reads to state this node's wants.
type fleetUsage struct{ p *core.LocalQuotaProvider }

func (u fleetUsage) Live(tenant string) int64 {
	s, ok := u.p.TenantSnapshot(tenant)
	if !ok {
		return 0
	}
	return int64(s.Live)
}

func (u fleetUsage) Refused(tenant string) uint64 {
	n, _ := u.p.FleetRefused(tenant)
	return n
}

// fleetStatus is the status page's view of every fleet-limited tenant.
func (n *Node) fleetStatus(now time.Time) []statusFleetJSON {
	if len(n.fleetTenants) == 0 {
		return nil
	}
	byName := map[string]fleet.TenantStatus{}
	if n.fleet != nil {
		for _, s := range n.fleet.Status() {
			byName[s.Name] = s
		}
	}
	out := make([]statusFleetJSON, 0, len(n.fleetTenants))
	for _, name := range n.fleetTenants {
		f := statusFleetJSON{Tenant: name, Limit: -1, Broker: n.fleet != nil}
		if s, ok := byName[name]; ok {
			f.Limit, f.Held, f.Problem = s.Limit, s.Held, s.Problem
		}
		if slice, until, published, ok := n.provider.FleetSlice(name); ok && published {
			f.Slice, f.Published = slice, true
			f.ValidForMS = until.Sub(now).Milliseconds()
		}
		if snap, ok := n.provider.TenantSnapshot(name); ok {
			f.Live = snap.Live
		}
		out = append(out, f)
	}
	return out
}
