package policy

import (
	"fmt"
	"slices"
)

// Dense small-integer IDs assigned by [Compile], in file order.
type (
	TenantID     int32
	TrustClassID int32
	QueueClassID int32
)

// FeatureSet is a set of cell features, one bit per feature that some
// configured cell class offers (bit numbers are per compiled policy).
type FeatureSet uint64

// Compiled is an immutable, validated node policy with dense IDs. Every
// accessor returns a copy; nothing reachable from it can be changed, so it
// is safe to share between goroutines without locks.
type Compiled struct {
	node          NodeSettings
	backends      []string
	stateModels   []string
	tenants       []TenantSettings
	tenantByName  map[string]TenantID
	allow         allowlist // (tenant ID, subject) -> kinds
	trustClasses  []TrustClassSettings
	trustByName   map[string]TrustClassID
	queueClasses  []QueueClassSettings
	queueByName   map[string]QueueClassID
	priorityQueue []QueueClassID // index: priority
	cells         [NumCellClasses]CellClassSettings
	features      []string // index: feature bit
}

type principalKinds uint8

// NodeSettings is the node-wide part of a compiled policy.
type NodeSettings struct {
	Placement                       Placement
	BudgetCeiling                   NodeBudgetCeiling
	Limits                          Limits
	MaximumPayloadBytes             uint64
	MaximumPriority                 uint32
	MaximumIdentifierBytes          uint32
	MaximumGeneratedIdentifierBytes uint32
	MaximumMetadataEntries          uint32
	MaximumMetadataBytes            uint64
	Overload                        OverloadPolicy
	Deadline                        DeadlinePolicy
}

// TenantSettings is one compiled tenant.
type TenantSettings struct {
	ID                  TenantID
	Name                string
	TrustClasses        uint64 // bit i: TrustClassID i is permitted
	CellClasses         CellClassSet
	MaximumPriority     uint32
	MaximumPayloadBytes uint64
	Limits              Limits
	// FleetLimited: the fleet block marks the tenant, so its live
	// activations are also held to the slice of the fleet limit that a
	// broker publishes on this node (none published: refused).
	FleetLimited bool
}

// PermitsTrustClass reports whether the tenant may run revisions of class t.
func (t TenantSettings) PermitsTrustClass(id TrustClassID) bool {
	return id >= 0 && id < 64 && t.TrustClasses&(1<<uint(id)) != 0
}

// TrustClassSettings is one compiled trust class.
type TrustClassSettings struct {
	ID          TrustClassID
	Name        string
	CellClasses CellClassSet
	Limits      Limits
}

// QueueClassSettings is one compiled queue class.
type QueueClassSettings struct {
	ID          QueueClassID
	Name        string
	MinPriority uint32
	MaxPriority uint32
	MaxQueued   uint64
}

// CellClassSettings is one configured cell class.
type CellClassSettings struct {
	Class       CellClass
	Configured  bool
	MemoryBytes uint64
	Parallelism uint64
	Threading   ThreadingSet
	Features    FeatureSet
}

// Compile validates p and compiles it. The result shares nothing with p:
// changing p afterwards changes nothing in the compiled policy.
func Compile(p *NodeAdmissionPolicy) (*Compiled, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &Compiled{
		backends:     slices.Clone(p.Node.Backends),
		stateModels:  slices.Clone(p.Node.StateModels),
		tenantByName: make(map[string]TenantID, len(p.Tenants)),
		trustByName:  make(map[string]TrustClassID, len(p.TrustClasses)),
		queueByName:  make(map[string]QueueClassID, len(p.QueueClasses)),
	}
	n := p.Node
	c.node = NodeSettings{
		Placement: n.Placement, BudgetCeiling: n.BudgetCeiling, Limits: n.Limits,
		MaximumPayloadBytes: n.MaximumPayloadBytes, MaximumPriority: n.MaximumPriority,
		MaximumIdentifierBytes: n.MaximumIdentifierBytes, MaximumGeneratedIdentifierBytes: n.MaximumGeneratedIdentifierBytes,
		MaximumMetadataEntries: n.MaximumMetadataEntries, MaximumMetadataBytes: n.MaximumMetadataBytes,
		Overload: n.Overload, Deadline: n.Deadline,
	}
	for _, cp := range p.CellClasses {
		class, _ := ParseCellClass(cp.Class)
		s := CellClassSettings{Class: class, Configured: true, MemoryBytes: cp.MemoryBytes, Parallelism: cp.Parallelism}
		for _, t := range cp.Threading {
			th, _ := ParseThreading(t)
			s.Threading = s.Threading.With(th)
		}
		for _, f := range cp.Features {
			bit := slices.Index(c.features, f)
			if bit < 0 {
				bit = len(c.features)
				c.features = append(c.features, f)
			}
			s.Features |= 1 << uint(bit)
		}
		c.cells[class] = s
	}
	for i := range c.cells {
		c.cells[i].Class = CellClass(i)
	}
	cellSet := func(names []string) CellClassSet {
		var set CellClassSet
		for _, n := range names {
			class, _ := ParseCellClass(n)
			set = set.With(class)
		}
		return set
	}
	for i, tp := range p.TrustClasses {
		id := TrustClassID(i)
		c.trustClasses = append(c.trustClasses, TrustClassSettings{ID: id, Name: tp.Name, CellClasses: cellSet(tp.CellClasses), Limits: tp.Limits})
		c.trustByName[tp.Name] = id
	}
	for i, qp := range p.QueueClasses {
		id := QueueClassID(i)
		c.queueClasses = append(c.queueClasses, QueueClassSettings{ID: id, Name: qp.Name, MinPriority: qp.MinPriority, MaxPriority: qp.MaxPriority, MaxQueued: qp.MaxQueued})
		c.queueByName[qp.Name] = id
	}
	c.priorityQueue = make([]QueueClassID, int(n.MaximumPriority)+1)
	for pr := range c.priorityQueue {
		for _, q := range c.queueClasses {
			if uint32(pr) >= q.MinPriority && uint32(pr) <= q.MaxPriority {
				c.priorityQueue[pr] = q.ID
			}
		}
	}
	fleet := make(map[string]bool, len(p.Fleet.Tenants))
	for _, name := range p.Fleet.Tenants {
		fleet[name] = true
	}
	principals := make([]map[string]principalKinds, 0, len(p.Tenants)) // by TenantID: subject -> kinds
	for i, tp := range p.Tenants {
		id := TenantID(i)
		t := TenantSettings{ID: id, Name: tp.ID, CellClasses: cellSet(tp.CellClasses),
			MaximumPriority: tp.MaximumPriority, MaximumPayloadBytes: tp.MaximumPayloadBytes, Limits: tp.Limits}
		for _, tc := range tp.TrustClasses {
			t.TrustClasses |= 1 << uint(c.trustByName[tc])
		}
		allow := make(map[string]principalKinds, len(tp.Principals))
		for _, pr := range tp.Principals {
			kind, _ := ParsePrincipalKind(pr.Kind)
			allow[pr.Subject] |= 1 << kind
		}
		t.FleetLimited = fleet[tp.ID]
		c.tenants = append(c.tenants, t)
		principals = append(principals, allow)
		c.tenantByName[tp.ID] = id
	}
	c.allow = newAllowlist(principals)
	return c, nil
}

// MustCompile compiles p and panics if it is invalid; for tests and
// embedded defaults only.
func MustCompile(p *NodeAdmissionPolicy) *Compiled {
	c, err := Compile(p)
	if err != nil {
		panic(fmt.Sprintf("policy: MustCompile: %v", err))
	}
	return c
}

// Node returns the node-wide settings.
func (c *Compiled) Node() NodeSettings { return c.node }

// Backends returns the backends the node supports.
func (c *Compiled) Backends() []string { return slices.Clone(c.backends) }

// StateModels returns the state models the node supports.
func (c *Compiled) StateModels() []string { return slices.Clone(c.stateModels) }

// SupportsBackend reports whether the node supports backend b.
func (c *Compiled) SupportsBackend(b string) bool { return slices.Contains(c.backends, b) }

// SupportsStateModel reports whether the node supports state model m.
func (c *Compiled) SupportsStateModel(m string) bool { return slices.Contains(c.stateModels, m) }

// NumTenants is the number of tenants; IDs are 0..NumTenants-1.
func (c *Compiled) NumTenants() int { return len(c.tenants) }

// Tenant returns tenant id's settings.
func (c *Compiled) Tenant(id TenantID) TenantSettings { return c.tenants[id] }

// TenantID looks a tenant up by name.
func (c *Compiled) TenantID(name string) (TenantID, bool) {
	id, ok := c.tenantByName[name]
	return id, ok
}

// NumTrustClasses is the number of trust classes.
func (c *Compiled) NumTrustClasses() int { return len(c.trustClasses) }

// TrustClass returns trust class id's settings.
func (c *Compiled) TrustClass(id TrustClassID) TrustClassSettings { return c.trustClasses[id] }

// TrustClassID looks a trust class up by name.
func (c *Compiled) TrustClassID(name string) (TrustClassID, bool) {
	// A node has a handful of trust classes; comparing names costs less
	// than hashing one. The map serves the rest.
	if len(c.trustClasses) <= 8 {
		for i := range c.trustClasses {
			if c.trustClasses[i].Name == name {
				return TrustClassID(i), true
			}
		}
		return 0, false
	}
	id, ok := c.trustByName[name]
	return id, ok
}

// NumQueueClasses is the number of queue classes.
func (c *Compiled) NumQueueClasses() int { return len(c.queueClasses) }

// QueueClass returns queue class id's settings.
func (c *Compiled) QueueClass(id QueueClassID) QueueClassSettings { return c.queueClasses[id] }

// QueueClassID looks a queue class up by name.
func (c *Compiled) QueueClassID(name string) (QueueClassID, bool) {
	id, ok := c.queueByName[name]
	return id, ok
}

// QueueClassFor returns the queue class holding priority, if the priority
// is within the node maximum.
func (c *Compiled) QueueClassFor(priority uint32) (QueueClassID, bool) {
	if uint64(priority) >= uint64(len(c.priorityQueue)) {
		return 0, false
	}
	return c.priorityQueue[priority], true
}

// CellClass returns the settings of class; Configured is false for a class
// the node does not configure.
func (c *Compiled) CellClass(class CellClass) CellClassSettings {
	if int(class) >= NumCellClasses {
		return CellClassSettings{Class: class}
	}
	return c.cells[class]
}

// Feature returns the bit of a feature that some configured cell class
// offers.
func (c *Compiled) Feature(name string) (FeatureSet, bool) {
	for i, f := range c.features {
		if f == name {
			return 1 << uint(i), true
		}
	}
	return 0, false
}

// Features returns the features the node's cell classes offer, by bit.
func (c *Compiled) Features() []string { return slices.Clone(c.features) }
