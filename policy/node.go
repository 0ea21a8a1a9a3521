package policy

import "time"

// NodeAdmissionPolicy is the decoded node policy file (docs/policy-format.md). It is a
// plain, mutable description; [Compile] turns a valid one into the
// immutable [Compiled] form that admission reads.
type NodeAdmissionPolicy struct {
	Node         NodePolicy
	QueueClasses []QueueClassPolicy
	CellClasses  []CellClassPolicy
	TrustClasses []TrustClassPolicy
	Tenants      []TenantPolicy
	// Fleet marks the tenants whose live activations a fleet-wide limit
	// bounds; the zero value (the file has no fleet block) marks none.
	Fleet FleetPolicy
}

// FleetPolicy is the optional fleet block: the tenants whose live
// activations are held to a slice of a fleet-wide limit that a trusted
// broker publishes into the provider (core.LocalQuotaProvider.PublishFleetSlice).
// A marked tenant with no slice published is refused (fail closed).
type FleetPolicy struct {
	Tenants []string
}

// NodePolicy is the node-wide part of the policy.
type NodePolicy struct {
	Placement                       Placement
	Backends                        []string
	StateModels                     []string
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

// NodeBudgetCeiling is the hard per-activation node budget. Its wall time
// is always finite and positive.
type NodeBudgetCeiling struct {
	CPUFuel     uint64
	MemoryBytes uint64
	WallTime    time.Duration
}

// Limits bounds the concurrent reservations of one scope (node, tenant or
// trust class). Zero grants nothing.
type Limits struct {
	MaxLiveActivations     uint64
	MaxQueuedReservations  uint64
	MaxReservedCPUFuel     uint64
	MaxReservedMemoryBytes uint64
}

// OverloadPolicy holds the node pressure thresholds (in (0,1]; at or above
// rejects) and how old a load sample may be.
type OverloadPolicy struct {
	CPUThreshold          float64
	MemoryThreshold       float64
	MaximumObservationAge time.Duration
}

// DeadlinePolicy holds the configured estimates of the feasibility check.
type DeadlinePolicy struct {
	EstimatedServiceTime time.Duration
	MinimumExecutionTime time.Duration
	SafetyMargin         time.Duration
}

// QueueClassPolicy is a named priority range with its own queue bound.
type QueueClassPolicy struct {
	Name        string
	MinPriority uint32
	MaxPriority uint32
	MaxQueued   uint64
}

// CellClassPolicy describes the cells of one class configured on the node.
type CellClassPolicy struct {
	Class       string
	MemoryBytes uint64
	Parallelism uint64
	Threading   []string
	Features    []string
}

// TrustClassPolicy is a trust class: its permitted cell classes and limits.
type TrustClassPolicy struct {
	Name        string
	CellClasses []string
	Limits      Limits
}

// TenantPolicy is one tenant's authorization and limits.
type TenantPolicy struct {
	ID                  string
	Principals          []PrincipalPolicy
	TrustClasses        []string
	CellClasses         []string
	MaximumPriority     uint32
	MaximumPayloadBytes uint64
	Limits              Limits
}

// PrincipalPolicy is one allowlisted (kind, subject) pair.
type PrincipalPolicy struct {
	Kind    string
	Subject string
}
