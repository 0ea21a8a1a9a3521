package pipeline

import (
	"fmt"
	"reflect"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Counters is every counter a reservation or a cell moves: the ledger's
// node, tenant, trust-class, queue-class and cell-class scopes, the
// scheduler's queues and executions, and the pool's cells. After all
// activations have ended, each must be exactly what it was before they
// started (a quarantine aside, which moves the pool's usable cells).
type Counters struct {
	Node             core.QuotaSnapshot
	Tenants          []ScopeCounters
	TrustClasses     []ScopeCounters
	QueueClasses     []QueueCounters
	CellClasses      [policy.NumCellClasses]CellCounters
	LiveReservations int
	Executing        int
}

// ScopeCounters is one named ledger scope.
type ScopeCounters struct {
	Name  string
	Quota core.QuotaSnapshot
}

// QueueCounters is one queue class: the ledger's queued reservations and
// the scheduler's waiting activations.
type QueueCounters struct {
	Name     string
	Reserved uint64
	Waiting  int
}

// CellCounters is one cell class: the ledger's live backlog and the
// pool's cells.
type CellCounters struct {
	Backlog     uint64
	Configured  uint64
	Usable      uint64
	Free        uint64
	Leased      uint64
	Quarantined uint64
}

// Counters reads every counter. The reads are not one atomic snapshot;
// compare them only when the pipeline is quiet.
func (p *Pipeline) Counters() Counters {
	pr := p.provider
	c := pr.Policy()
	out := Counters{Node: pr.NodeSnapshot(), LiveReservations: pr.LiveReservations(), Executing: p.scheduler.Executing()}
	for i := range c.NumTenants() {
		name := c.Tenant(policy.TenantID(i)).Name
		s, _ := pr.TenantSnapshot(name)
		out.Tenants = append(out.Tenants, ScopeCounters{Name: name, Quota: s})
	}
	for i := range c.NumTrustClasses() {
		name := c.TrustClass(policy.TrustClassID(i)).Name
		s, _ := pr.TrustClassSnapshot(name)
		out.TrustClasses = append(out.TrustClasses, ScopeCounters{Name: name, Quota: s})
	}
	for i := range c.NumQueueClasses() {
		name := c.QueueClass(policy.QueueClassID(i)).Name
		q, _, _ := pr.QueueClassSnapshot(name)
		out.QueueClasses = append(out.QueueClasses, QueueCounters{Name: name, Reserved: q, Waiting: p.scheduler.Queued(name)})
	}
	for class := range policy.NumCellClasses {
		backlog, _ := pr.CellClassSnapshot(policy.CellClass(class))
		s := p.pool.Stats(policy.CellClass(class))
		out.CellClasses[class] = CellCounters{Backlog: backlog, Configured: s.Configured, Usable: s.Usable, Free: s.Free,
			Leased: s.Leased, Quarantined: s.Quarantined}
	}
	return out
}

// Equal reports whether every counter matches.
func (c Counters) Equal(o Counters) bool { return reflect.DeepEqual(c, o) }

// Diff names the counters that differ from o, for a failure message.
func (c Counters) Diff(o Counters) []string {
	var d []string
	add := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			d = append(d, fmt.Sprintf("%s: %+v != %+v", name, a, b))
		}
	}
	add("node", c.Node, o.Node)
	add("tenants", c.Tenants, o.Tenants)
	add("trust classes", c.TrustClasses, o.TrustClasses)
	add("queue classes", c.QueueClasses, o.QueueClasses)
	for class := range policy.NumCellClasses {
		add("cell class "+policy.CellClass(class).String(), c.CellClasses[class], o.CellClasses[class])
	}
	add("live reservations", c.LiveReservations, o.LiveReservations)
	add("executing", c.Executing, o.Executing)
	return d
}

// Residue names what is still held: any reservation in the ledger, any
// waiting or executing activation, any leased cell. A drained pipeline
// has none; quarantined cells are not residue (they are reported by the
// pool and are the runner's intended answer to an uncertain cleanup).
func (c Counters) Residue() []string {
	var r []string
	held := func(name string, q core.QuotaSnapshot) {
		if q.Live != 0 || q.Queued != 0 || q.CPUFuel != 0 || q.MemoryBytes != 0 {
			r = append(r, fmt.Sprintf("%s holds %+v", name, q))
		}
	}
	held("node", c.Node)
	for _, s := range c.Tenants {
		held("tenant "+s.Name, s.Quota)
	}
	for _, s := range c.TrustClasses {
		held("trust class "+s.Name, s.Quota)
	}
	for _, q := range c.QueueClasses {
		if q.Reserved != 0 || q.Waiting != 0 {
			r = append(r, fmt.Sprintf("queue class %s: reserved %d, waiting %d", q.Name, q.Reserved, q.Waiting))
		}
	}
	for class, cc := range c.CellClasses {
		if cc.Backlog != 0 || cc.Leased != 0 {
			r = append(r, fmt.Sprintf("cell class %s: backlog %d, leased %d", policy.CellClass(class), cc.Backlog, cc.Leased))
		}
	}
	if c.LiveReservations != 0 {
		r = append(r, fmt.Sprintf("live table holds %d", c.LiveReservations))
	}
	if c.Executing != 0 {
		r = append(r, fmt.Sprintf("%d executing", c.Executing))
	}
	return r
}
