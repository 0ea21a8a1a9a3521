package core

import (
	"fmt"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// Usage is every scope's reservations and limits at one instant, named
// by the policy's configured names: a consistent view across scopes, for
// gauges and administrative surfaces. Like the snapshots, it is a
// trusted-local surface; the embedding API must authorize access.
type Usage struct {
	Node         ScopeUsage
	Tenants      []ScopeUsage // in policy order
	TrustClasses []ScopeUsage // in policy order
	QueueClasses []QueueClassUsage
	CellClasses  []CellClassUsage // configured classes only, smallest first
}

// ScopeUsage is one named scope with all four dimensions.
type ScopeUsage struct {
	Name        string // empty for the node
	Live        uint64
	Queued      uint64
	CPUFuel     uint64
	MemoryBytes uint64
	Limits      policy.Limits
}

// QueueClassUsage is a queue class's queued reservations and its bound.
type QueueClassUsage struct {
	Name      string
	Queued    uint64
	MaxQueued uint64
}

// CellClassUsage is a configured cell class's live backlog (queued plus
// executing). Admission sets it no limit of its own: it is the backlog of
// the feasibility check.
type CellClassUsage struct {
	Class policy.CellClass
	Live  uint64
}

// Usage reads every scope under the ledger's exact-path locks, taken once, so one
// call is consistent across scopes. It allocates the result; it is meant
// for scrapes and operators, not for the admission path.
func (p *LocalQuotaProvider) Usage() Usage {
	var s atomicledger.Snapshot
	p.ledger.SnapshotInto(&s)
	u := Usage{
		Node:         scopeUsage("", s.Node, p.node.Limits),
		Tenants:      make([]ScopeUsage, len(p.tenants)),
		TrustClasses: make([]ScopeUsage, len(p.trust)),
		QueueClasses: make([]QueueClassUsage, len(p.queues)),
	}
	for i, t := range p.tenants {
		u.Tenants[i] = scopeUsage(t.Name, s.Tenants[i], t.Limits)
	}
	for i, t := range p.trust {
		u.TrustClasses[i] = scopeUsage(t.Name, s.TrustClass[i], t.Limits)
	}
	for i, q := range p.queues {
		u.QueueClasses[i] = QueueClassUsage{Name: q.Name, Queued: s.QueueQueued[i], MaxQueued: q.MaxQueued}
	}
	for class, c := range p.cells {
		if c.Configured {
			u.CellClasses = append(u.CellClasses, CellClassUsage{Class: policy.CellClass(class), Live: s.CellLive[class]})
		}
	}
	return u
}

func scopeUsage(name string, u atomicledger.Held, l policy.Limits) ScopeUsage {
	return ScopeUsage{Name: name, Live: u.Live, Queued: u.Queued, CPUFuel: u.CPUFuel, MemoryBytes: u.MemoryBytes, Limits: l}
}

// Held lists every scope that still holds a reservation, one line each
// (scope, then its non-zero counters), in the order of the fields; a
// ledger with nothing reserved has none. It is how a test, the soak or a
// drained node checks that every reservation came back.
func (u Usage) Held() []string {
	var out []string
	scope := func(what string, s ScopeUsage) {
		if s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			out = append(out, fmt.Sprintf("%s: live=%d queued=%d cpu_fuel=%d memory_bytes=%d", what, s.Live, s.Queued, s.CPUFuel, s.MemoryBytes))
		}
	}
	scope("node", u.Node)
	for _, s := range u.Tenants {
		scope("tenant "+s.Name, s)
	}
	for _, s := range u.TrustClasses {
		scope("trust class "+s.Name, s)
	}
	for _, q := range u.QueueClasses {
		if q.Queued != 0 {
			out = append(out, fmt.Sprintf("queue class %s: queued=%d", q.Name, q.Queued))
		}
	}
	for _, c := range u.CellClasses {
		if c.Live != 0 {
			out = append(out, fmt.Sprintf("cell class %s: live=%d", c.Class, c.Live))
		}
	}
	return out
}
