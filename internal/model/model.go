package model

import (
	"slices"
	"sync"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Model is the reference provider: one node's policy and ledger. It plays
// the role of core.LocalQuotaProvider; controllers come from it and share
// its ledger.
//
// The policy and the lookup maps never change after New. mu guards every
// counter and the live set; every operation that reads or changes them
// holds it for its whole duration.
type Model struct {
	policy       *policy.NodeAdmissionPolicy // a private deep copy
	tenants      map[string]*policy.TenantPolicy
	trustClasses map[string]*policy.TrustClassPolicy
	queueClasses map[string]*policy.QueueClassPolicy
	cellClasses  map[string]*policy.CellClassPolicy
	fleetLimited map[string]bool // the tenants the fleet block marks

	mu          sync.Mutex
	node        usage                   // guarded by mu
	tenantUsage map[string]*usage       // guarded by mu; by tenant ID
	trustUsage  map[string]*usage       // guarded by mu; by trust class name
	queueQueued map[string]uint64       // guarded by mu; by queue class name
	cellLive    map[string]uint64       // guarded by mu; by cell class name
	live        map[string]*reservation // guarded by mu; by liveKey(tenant, activation ID)
	fleet       map[string]fleetSlice   // guarded by mu; by tenant ID; absent: no slice
}

// fleetSlice is a fleet-limited tenant's published slice and the time it
// is valid until (exclusive).
type fleetSlice struct {
	slice int64
	until time.Time
}

// usage is one scope's counters.
type usage struct {
	live, queued, fuel, memory uint64
}

// reservation is what one admission holds. A released reservation is
// removed from the live set and never reused, so a handle to it can free
// nothing.
type reservation struct {
	tenant, trustClass, queueClass, cellClass string
	fuel, memory                              uint64
	executing                                 bool // guarded by Model.mu
	released                                  bool // guarded by Model.mu
}

func liveKey(tenant, activationID string) string { return tenant + "\x00" + activationID }

// New validates p and builds a model of it. The model keeps a deep copy:
// changing p afterwards changes nothing.
func New(p *policy.NodeAdmissionPolicy) (*Model, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = clonePolicy(p)
	m := &Model{
		policy:       p,
		tenants:      map[string]*policy.TenantPolicy{},
		trustClasses: map[string]*policy.TrustClassPolicy{},
		queueClasses: map[string]*policy.QueueClassPolicy{},
		cellClasses:  map[string]*policy.CellClassPolicy{},
		tenantUsage:  map[string]*usage{},
		trustUsage:   map[string]*usage{},
		queueQueued:  map[string]uint64{},
		cellLive:     map[string]uint64{},
		live:         map[string]*reservation{},
		fleetLimited: map[string]bool{},
		fleet:        map[string]fleetSlice{},
	}
	for _, name := range p.Fleet.Tenants {
		m.fleetLimited[name] = true
	}
	for i := range p.Tenants {
		m.tenants[p.Tenants[i].ID] = &p.Tenants[i]
		m.tenantUsage[p.Tenants[i].ID] = &usage{}
	}
	for i := range p.TrustClasses {
		m.trustClasses[p.TrustClasses[i].Name] = &p.TrustClasses[i]
		m.trustUsage[p.TrustClasses[i].Name] = &usage{}
	}
	for i := range p.QueueClasses {
		m.queueClasses[p.QueueClasses[i].Name] = &p.QueueClasses[i]
		m.queueQueued[p.QueueClasses[i].Name] = 0
	}
	for i := range p.CellClasses {
		m.cellClasses[p.CellClasses[i].Class] = &p.CellClasses[i]
		m.cellLive[p.CellClasses[i].Class] = 0
	}
	return m, nil
}

func clonePolicy(p *policy.NodeAdmissionPolicy) *policy.NodeAdmissionPolicy {
	c := *p
	c.Node.Backends = slices.Clone(p.Node.Backends)
	c.Node.StateModels = slices.Clone(p.Node.StateModels)
	c.QueueClasses = slices.Clone(p.QueueClasses)
	c.CellClasses = slices.Clone(p.CellClasses)
	for i := range c.CellClasses {
		c.CellClasses[i].Threading = slices.Clone(c.CellClasses[i].Threading)
		c.CellClasses[i].Features = slices.Clone(c.CellClasses[i].Features)
	}
	c.TrustClasses = slices.Clone(p.TrustClasses)
	for i := range c.TrustClasses {
		c.TrustClasses[i].CellClasses = slices.Clone(c.TrustClasses[i].CellClasses)
	}
	c.Fleet.Tenants = slices.Clone(p.Fleet.Tenants)
	c.Tenants = slices.Clone(p.Tenants)
	for i := range c.Tenants {
		c.Tenants[i].Principals = slices.Clone(c.Tenants[i].Principals)
		c.Tenants[i].TrustClasses = slices.Clone(c.Tenants[i].TrustClasses)
		c.Tenants[i].CellClasses = slices.Clone(c.Tenants[i].CellClasses)
	}
	return &c
}

// Controller returns a controller over the model's ledger that resolves
// revision policy through source, reads load from load and time from
// clock (nil means the system clock).
func (m *Model) Controller(source core.RevisionPolicySource, load core.NodeLoadSource, clock Clock) *Controller {
	if clock == nil {
		clock = systemClock{}
	}
	return &Controller{model: m, source: source, load: load, clock: clock}
}

func snapshot(u *usage, l policy.Limits) core.QuotaSnapshot {
	return core.QuotaSnapshot{Live: u.live, Queued: u.queued, CPUFuel: u.fuel, MemoryBytes: u.memory, Limits: l}
}

// NodeSnapshot reports the node scope.
func (m *Model) NodeSnapshot() core.QuotaSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return snapshot(&m.node, m.policy.Node.Limits)
}

// TenantSnapshot reports a configured tenant's scope.
func (m *Model) TenantSnapshot(tenant string) (core.QuotaSnapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tenants[tenant]
	if !ok {
		return core.QuotaSnapshot{}, false
	}
	return snapshot(m.tenantUsage[tenant], t.Limits), true
}

// TrustClassSnapshot reports a configured trust class's scope.
func (m *Model) TrustClassSnapshot(name string) (core.QuotaSnapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tc, ok := m.trustClasses[name]
	if !ok {
		return core.QuotaSnapshot{}, false
	}
	return snapshot(m.trustUsage[name], tc.Limits), true
}

// QueueClassSnapshot reports a queue class's queued reservations and bound.
func (m *Model) QueueClassSnapshot(name string) (queued, maxQueued uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q, ok := m.queueClasses[name]
	if !ok {
		return 0, 0, false
	}
	return m.queueQueued[name], q.MaxQueued, true
}

// CellClassSnapshot reports a configured cell class's live backlog.
func (m *Model) CellClassSnapshot(class policy.CellClass) (live uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.cellClasses[class.String()]; !ok {
		return 0, false
	}
	return m.cellLive[class.String()], true
}

// LiveReservations is the number of live reservations on the node.
func (m *Model) LiveReservations() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}

// reserveLocked adds r everywhere the ledger table (docs/ledger-and-load.md) says. The caller
// holds mu and has checked that r fits.
func (m *Model) reserveLocked(key string, r *reservation) {
	for _, u := range []*usage{&m.node, m.tenantUsage[r.tenant], m.trustUsage[r.trustClass]} {
		u.live++
		u.queued++
		u.fuel += r.fuel
		u.memory += r.memory
	}
	m.queueQueued[r.queueClass]++
	m.cellLive[r.cellClass]++
	m.live[key] = r
}

// startLocked returns r's queued slots. The caller holds mu.
func (m *Model) startLocked(r *reservation) {
	for _, u := range []*usage{&m.node, m.tenantUsage[r.tenant], m.trustUsage[r.trustClass]} {
		u.queued--
	}
	m.queueQueued[r.queueClass]--
	r.executing = true
}

// releaseLocked returns everything r still holds. The caller holds mu.
func (m *Model) releaseLocked(key string, r *reservation) {
	for _, u := range []*usage{&m.node, m.tenantUsage[r.tenant], m.trustUsage[r.trustClass]} {
		u.live--
		if !r.executing {
			u.queued--
		}
		u.fuel -= r.fuel
		u.memory -= r.memory
	}
	if !r.executing {
		m.queueQueued[r.queueClass]--
	}
	m.cellLive[r.cellClass]--
	r.released = true
	delete(m.live, key)
}

// PublishFleetSlice makes slice tenant's share of its fleet limit until
// validUntil. A tenant the fleet block does not mark is refused and
// nothing changes; a negative slice or the zero time is refused and
// withdraws the tenant's slice.
func (m *Model) PublishFleetSlice(tenant string, slice int64, validUntil time.Time) error {
	if !m.fleetLimited[tenant] {
		return fleetSliceRejected()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if slice < 0 || validUntil.IsZero() {
		delete(m.fleet, tenant)
		return fleetSliceRejected()
	}
	m.fleet[tenant] = fleetSlice{slice: slice, until: validUntil}
	return nil
}

// WithdrawFleetSlice removes a fleet-limited tenant's slice; false for
// any other tenant.
func (m *Model) WithdrawFleetSlice(tenant string) bool {
	if !m.fleetLimited[tenant] {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.fleet, tenant)
	return true
}

// fleetLocked is the fleet scope of step 13 for a fleet-limited tenant
// at now: a slice must be published and now before its deadline, and the
// tenant's live activations + 1 must not exceed it. The caller holds mu.
func (m *Model) fleetLocked(tenant string, now time.Time) error {
	f, ok := m.fleet[tenant]
	if !ok || !now.Before(f.until) {
		return fleetUnavailable()
	}
	if m.tenantUsage[tenant].live+1 > uint64(f.slice) {
		return capacityExhausted("fleet", "live-activations", true)
	}
	return nil
}
