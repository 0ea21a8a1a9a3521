package core

import (
	"reflect"
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/policy"
)

// LocalQuotaProvider owns a node's immutable compiled policy, its one
// quota ledger and its operator counters. Create one per node and share
// it with every controller; independent providers would be independent
// limits, which is not a supported node composition.
type LocalQuotaProvider struct {
	policy  *policy.Compiled
	node    policy.NodeSettings
	tenants []policy.TenantSettings
	trust   []policy.TrustClassSettings
	queues  []policy.QueueClassSettings
	cells   [policy.NumCellClasses]policy.CellClassSettings
	// queueOf is each priority's queue class, up to the node's maximum
	// priority (step 4 refuses any higher one before bind reads it).
	queueOf []policy.QueueClassID
	// threading is every model some configured cell class supports.
	threading policy.ThreadingSet
	ledger    *atomicledger.Ledger
	metrics   *metrics
	young     *youngPermits // permits issued since the last sweep, by ledger slot
	// recording: built by NewRecordingProvider, which reports the
	// ledger's orders; journal, when set, is told of its moves
	// (record.go).
	recording bool
	journal   Journal
	// fleet holds each tenant's fleet slice, by tenant ID (fleet.go);
	// only fleet-limited tenants' entries are ever written. Deadlines are
	// nanoseconds after fleetEpoch, a reading taken when the provider was
	// built. Publishers write with the ledger's mutex held; readers take
	// no lock.
	fleet      []fleetEntry
	fleetEpoch time.Time
	// fleetRefused counts each fleet-limited tenant's refusals for a full
	// slice, metricStripes counters per tenant (fleetEntry.refused).
	fleetRefused []paddedCounter
}

// NewLocalQuotaProvider validates and compiles p, then allocates the
// ledger. An invalid policy returns an error before any state is retained.
func NewLocalQuotaProvider(p *policy.NodeAdmissionPolicy) (*LocalQuotaProvider, error) {
	compiled, err := policy.Compile(p)
	if err != nil {
		return nil, err
	}
	return newProvider(compiled), nil
}

// newProvider builds a provider from a compiled policy.
func newProvider(c *policy.Compiled) *LocalQuotaProvider {
	pr := &LocalQuotaProvider{
		policy:  c,
		node:    c.Node(),
		tenants: make([]policy.TenantSettings, c.NumTenants()),
		trust:   make([]policy.TrustClassSettings, c.NumTrustClasses()),
		queues:  make([]policy.QueueClassSettings, c.NumQueueClasses()),
		ledger:  atomicledger.New(c),
		metrics: newMetrics(),
		young:   newYoungPermits(c.Node().Limits.MaxLiveActivations),
		fleet:   make([]fleetEntry, c.NumTenants()),
		// The fleet epoch: a system clock reading, whose monotonic
		// reading the deadlines of a broker on the system clock are
		// compared by.
		fleetEpoch: time.Now(),
	}
	armCollectionTick(pr.young)
	fleetTenants := 0
	for i := range pr.tenants {
		pr.tenants[i] = c.Tenant(policy.TenantID(i))
		if pr.tenants[i].FleetLimited {
			pr.fleet[i].refused = fleetTenants * metricStripes
			fleetTenants++
		}
	}
	pr.fleetRefused = make([]paddedCounter, fleetTenants*metricStripes)
	for i := range pr.trust {
		pr.trust[i] = c.TrustClass(policy.TrustClassID(i))
	}
	for i := range pr.queues {
		pr.queues[i] = c.QueueClass(policy.QueueClassID(i))
	}
	pr.queueOf = make([]policy.QueueClassID, uint64(pr.node.MaximumPriority)+1)
	for i := range pr.queueOf {
		pr.queueOf[i], _ = c.QueueClassFor(uint32(i))
	}
	for i := range pr.cells {
		pr.cells[i] = c.CellClass(policy.CellClass(i))
		if pr.cells[i].Configured {
			pr.threading |= pr.cells[i].Threading
		}
	}
	return pr
}

// Policy returns the compiled policy.
func (p *LocalQuotaProvider) Policy() *policy.Compiled { return p.policy }

// ControllerConfig is what a controller reads besides the provider's
// ledger. Every field may be left out.
type ControllerConfig struct {
	// Source resolves revision policy: the pinned catalog view. Without
	// one (nil, or a typed nil) every revision is unavailable.
	Source RevisionPolicySource
	// Load is the node load source. Without one (nil, or a typed nil)
	// admission fails closed with load-unavailable.
	Load NodeLoadSource
	// Clock is the time source; nil is the system clock.
	Clock deadline.Clock
}

// Controller returns an admission controller over this provider's ledger.
func (p *LocalQuotaProvider) Controller(cfg ControllerConfig) *AdmissionController {
	c := &AdmissionController{provider: p, source: cfg.Source, load: cfg.Load, clock: cfg.Clock}
	if c.clock == nil {
		c.clock = deadline.System{}
	}
	_, c.system = c.clock.(deadline.System)
	c.base = c.clock.Now()
	c.baseFleet = int64(c.base.Sub(p.fleetEpoch))
	if isNilPointer(c.load) {
		c.load = nil
	}
	if isNilPointer(c.source) {
		c.source = nil
	}
	c.records, _ = c.source.(RecordSource)
	return c
}

// QuotaSnapshot is one scope's reservations and limits. Reservations are
// concurrent promised capacity, not a replenishing rate: nothing resets
// them but releases.
type QuotaSnapshot struct {
	Live        uint64
	Queued      uint64
	CPUFuel     uint64
	MemoryBytes uint64
	Limits      policy.Limits
}

func snapshotOf(u atomicledger.Held, l policy.Limits) QuotaSnapshot {
	return QuotaSnapshot{Live: u.Live, Queued: u.Queued, CPUFuel: u.CPUFuel, MemoryBytes: u.MemoryBytes, Limits: l}
}

// NodeSnapshot reports the node scope. Snapshots are trusted-local
// administrative surfaces: the embedding API must authorize access.
func (p *LocalQuotaProvider) NodeSnapshot() QuotaSnapshot {
	return snapshotOf(p.ledger.Node(), p.node.Limits)
}

// TenantSnapshot reports a configured tenant's scope.
func (p *LocalQuotaProvider) TenantSnapshot(tenant string) (QuotaSnapshot, bool) {
	id, ok := p.policy.TenantID(tenant)
	if !ok {
		return QuotaSnapshot{}, false
	}
	return snapshotOf(p.ledger.Tenant(id), p.tenants[id].Limits), true
}

// TrustClassSnapshot reports a configured trust class's scope.
func (p *LocalQuotaProvider) TrustClassSnapshot(name string) (QuotaSnapshot, bool) {
	id, ok := p.policy.TrustClassID(name)
	if !ok {
		return QuotaSnapshot{}, false
	}
	return snapshotOf(p.ledger.TrustClass(id), p.trust[id].Limits), true
}

// QueueClassSnapshot reports a queue class's queued reservations and bound.
func (p *LocalQuotaProvider) QueueClassSnapshot(name string) (queued, maxQueued uint64, ok bool) {
	id, ok := p.policy.QueueClassID(name)
	if !ok {
		return 0, 0, false
	}
	return p.ledger.QueueClassQueued(id), p.queues[id].MaxQueued, true
}

// CellClassSnapshot reports a configured cell class's live backlog. It
// takes the ledger's mutex for one read: only transactions judge the
// backlog, so it is a plain count rather than an atomic.
func (p *LocalQuotaProvider) CellClassSnapshot(class policy.CellClass) (live uint64, ok bool) {
	if int(class) >= policy.NumCellClasses || !p.cells[class].Configured {
		return 0, false
	}
	return p.ledger.CellClassLive(class), true
}

// LiveReservations is the number of live reservations on the node.
func (p *LocalQuotaProvider) LiveReservations() int { return p.ledger.LiveEntries() }

// isNilPointer reports whether v is nil or an interface holding a nil
// pointer, map, function, channel or slice: a typed nil would otherwise
// pass a nil check and fault on its first call.
func isNilPointer(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}
