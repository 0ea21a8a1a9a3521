package gen

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"pgregory.net/rapid"

	"latent.dev/admission/policy"
)

// The vocabulary policies are drawn from. Names outside a drawn policy
// ("hooli", "ghost", "gpu", "tpu", "durable") reach the unknown-name rows.
var (
	tenants       = []string{"acme", "globex", "initech"}
	trustClasses  = []string{"standard", "privileged"}
	queueClasses  = []string{"batch", "online", "urgent"}
	featureNames  = []string{"simd", "threads"}
	allowlist     = []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}, {Kind: "service", Subject: "billing"}, {Kind: "user", Subject: "bob"}}
	activationIDs = []string{"a1", "a2", "a3", "a4", "a5"}
)

// Names returns every tenant, trust class and queue class name a drawn
// policy may configure, so that tests can ask for every scope's snapshot.
func Names() (tenantNames, trustClassNames, queueClassNames []string) {
	return slices.Clone(tenants), slices.Clone(trustClasses), slices.Clone(queueClasses)
}

// Generator draws policies and revisions. A friendly generator draws
// only what lets ordinary requests through steps 1 to 12, so that most of
// its sequences exercise the ledger, capacity and feasibility; a hostile
// one also draws what nobody offers or permits, so that every rejection
// row is reached by configuration as well as by bad requests.
type Generator struct {
	T        *rapid.T
	Friendly bool
}

// odd is true one time in den, never for a friendly generator.
func (g Generator) odd(den int, label string) bool { return !g.Friendly && Chance(g.T, 1, den, label) }

// subset keeps each element of all with probability 3/4; for a friendly
// generator, it keeps them all.
func (g Generator) subset(all []string, label string) []string {
	var out []string
	for _, s := range all {
		if g.Friendly || Chance(g.T, 3, 4, label+"."+s) {
			out = append(out, s)
		}
	}
	return out
}

// nonEmpty is a subset that is empty only when odd.
func (g Generator) nonEmpty(all []string, label string) []string {
	out := g.subset(all, label)
	if len(out) == 0 && len(all) > 0 && !g.odd(8, label+".empty") {
		out = []string{Pick(g.T, all, label+".one")}
	}
	return out
}

// positive is 1 to hi, and 0 when odd.
func (g Generator) positive(hi int, label string) uint64 {
	if g.odd(9, label+".zero") {
		return 0
	}
	return uint64(Int(g.T, 1, hi, label))
}

// limit draws one limit from choices, and zero (which disables admission
// at that scope) about one time in a hundred.
func (g Generator) limit(choices []uint64, label string) uint64 {
	if Chance(g.T, 1, 40, label+".zero") {
		return 0
	}
	return Pick(g.T, choices, label)
}

// limits draws a scope's limits: a few slots, and fuel and memory for a
// few grants (which are at most 8 each).
func (g Generator) limits(label string) policy.Limits {
	slots, amounts := []uint64{2, 3, 1, 4}, []uint64{16, 8, 24, 4}
	return policy.Limits{
		MaxLiveActivations:     g.limit(slots, label+".live"),
		MaxQueuedReservations:  g.limit(slots, label+".queued"),
		MaxReservedCPUFuel:     g.limit(amounts, label+".fuel"),
		MaxReservedMemoryBytes: g.limit(amounts, label+".memory"),
	}
}

// Policy draws a small node policy that passes validation, with limits so
// small that capacity boundaries are hit often.
func (g Generator) Policy() *policy.NodeAdmissionPolicy {
	t := g.T
	maxPriority := Int(t, 0, 4, "node.maximum_priority")
	p := &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement: policy.Placement{
				Architecture: Pick(t, []string{"x86_64", "arm64"}, "node.architecture"),
				Region:       Pick(t, []string{"eu", "us"}, "node.region"),
				Zone:         Pick(t, []string{"a", "b"}, "node.zone"),
			},
			Backends:    g.nonEmpty([]string{"wasm", "native"}, "node.backends"),
			StateModels: g.nonEmpty([]string{"stateless", "stateful"}, "node.state_models"),
			BudgetCeiling: policy.NodeBudgetCeiling{
				CPUFuel:     g.positive(8, "node.ceiling.fuel"),
				MemoryBytes: g.positive(8, "node.ceiling.memory"),
				WallTime:    Pick(t, []time.Duration{2 * time.Second, 200 * time.Millisecond, 40 * time.Millisecond}, "node.ceiling.wall"),
			},
			Limits:                          g.limits("node.limits"),
			MaximumPayloadBytes:             uint64(Int(t, 0, 4, "node.payload")),
			MaximumPriority:                 uint32(maxPriority),
			MaximumIdentifierBytes:          uint32(Int(t, 10, 12, "node.identifier_bytes")),
			MaximumGeneratedIdentifierBytes: uint32(Int(t, 83, 86, "node.generated_identifier_bytes")),
			MaximumMetadataEntries:          uint32(Int(t, 0, 3, "node.metadata_entries")),
			MaximumMetadataBytes:            uint64(Int(t, 0, 16, "node.metadata_bytes")),
			Overload: policy.OverloadPolicy{
				CPUThreshold:          Pick(t, []float64{0.9, 1, 0.5}, "node.cpu_threshold"),
				MemoryThreshold:       Pick(t, []float64{0.9, 1, 0.5}, "node.memory_threshold"),
				MaximumObservationAge: Pick(t, []time.Duration{5 * time.Second, time.Second, 100 * time.Millisecond}, "node.maximum_age"),
			},
			Deadline: policy.DeadlinePolicy{
				EstimatedServiceTime: Pick(t, []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond}, "node.estimated_service"),
				MinimumExecutionTime: Pick(t, []time.Duration{0, 5 * time.Millisecond}, "node.minimum_execution"),
				SafetyMargin:         Pick(t, []time.Duration{0, 5 * time.Millisecond}, "node.safety_margin"),
			},
		},
	}
	if g.odd(8, "node.estimated_service.huge") {
		p.Node.Deadline.EstimatedServiceTime = math.MaxInt64 // overflows once the backlog reaches the parallelism
	}
	if g.odd(16, "node.safety_margin.huge") {
		p.Node.Deadline.SafetyMargin = math.MaxInt64 - 1 // overflows on every admission
	}
	// Queue classes: cut 0..maxPriority into 1 to 3 ranges; the last may
	// reach past the node maximum.
	n := Int(t, 1, min(3, maxPriority+1), "queue_classes")
	var cuts []int
	if n > 1 {
		cuts = rapid.SliceOfNDistinct(rapid.IntRange(1, maxPriority), n-1, n-1, rapid.ID[int]).Draw(t, "queue_cuts")
		sort.Ints(cuts)
	}
	low := 0
	for i := 0; i < n; i++ {
		high := maxPriority + Int(t, 0, 2, "queue_overhang")
		if i < n-1 {
			high = cuts[i] - 1
		}
		p.QueueClasses = append(p.QueueClasses, policy.QueueClassPolicy{Name: queueClasses[i],
			MinPriority: uint32(low), MaxPriority: uint32(high), MaxQueued: g.limit([]uint64{2, 3, 1, 4}, "queue.max_queued")})
		low = high + 1
	}
	classes := rapid.SliceOfNDistinct(rapid.IntRange(0, policy.NumCellClasses-1), 1, policy.NumCellClasses, rapid.ID[int]).Draw(t, "cell_classes")
	var cellNames []string
	for _, c := range classes {
		name := policy.CellClass(c).String()
		cellNames = append(cellNames, name)
		threading := []string{"single", "multi"}
		if !g.Friendly {
			threading = Pick(t, [][]string{{"single", "multi"}, {"single"}, {"multi"}}, "cell.threading")
		}
		p.CellClasses = append(p.CellClasses, policy.CellClassPolicy{Class: name, MemoryBytes: Pick(t, []uint64{8, 6, 4, 2, 1}, "cell.memory"),
			Parallelism: uint64(Int(t, 1, 3, "cell.parallelism")), Threading: threading,
			Features: (Generator{T: t}).subset(featureNames, "cell.features")})
	}
	for i := 0; i < Int(t, 1, len(trustClasses), "trust_classes"); i++ {
		p.TrustClasses = append(p.TrustClasses, policy.TrustClassPolicy{Name: trustClasses[i],
			CellClasses: g.nonEmpty(cellNames, "trust.cells"), Limits: g.limits("trust.limits")})
	}
	var trustNames []string
	for _, tc := range p.TrustClasses {
		trustNames = append(trustNames, tc.Name)
	}
	for i := 0; i < Int(t, 1, len(tenants), "tenants"); i++ {
		tenantPriority := maxPriority
		if Chance(t, 1, 3, "tenant.priority.lower") {
			tenantPriority = Int(t, 0, maxPriority, "tenant.priority")
		}
		var principals []policy.PrincipalPolicy
		for _, pr := range allowlist {
			if Chance(t, 1, 2, "tenant.principal") {
				principals = append(principals, pr)
			}
		}
		if len(principals) == 0 && !g.odd(8, "tenant.principal.none") {
			principals = append(principals, Pick(t, allowlist, "tenant.principal.one"))
		}
		payload := uint64(Int(t, 0, 4, "tenant.payload"))
		if g.Friendly {
			payload = max(payload, 1)
			p.Node.MaximumPayloadBytes = max(p.Node.MaximumPayloadBytes, 1)
		}
		p.Tenants = append(p.Tenants, policy.TenantPolicy{
			ID: tenants[i], Principals: principals,
			TrustClasses:        g.nonEmpty(trustNames, "tenant.trust"),
			CellClasses:         g.nonEmpty(cellNames, "tenant.cells"),
			MaximumPriority:     uint32(tenantPriority),
			MaximumPayloadBytes: payload,
			Limits:              g.limits("tenant.limits"),
		})
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("generated an invalid policy: %v", err)
	}
	return p
}

func (g Generator) ceiling(label string) policy.Ceiling {
	t := g.T
	var c policy.Ceiling
	if Chance(t, 1, 3, label+".fuel.set") {
		c.CPUFuel = policy.Some(g.positive(8, label+".fuel"))
	}
	if Chance(t, 1, 3, label+".memory.set") {
		c.MemoryBytes = policy.Some(g.positive(8, label+".memory"))
	}
	if Chance(t, 1, 3, label+".wall.set") {
		c.WallTime = policy.Some(Pick(t, []time.Duration{time.Second, 100 * time.Millisecond, 30 * time.Millisecond}, label+".wall"))
		if g.odd(6, label+".wall.zero") {
			c.WallTime = policy.Some[time.Duration](0)
		}
	}
	return c
}

// revisionPolicy draws a revision policy for tenant, mostly one the node
// and the tenant can run.
func (g Generator) revisionPolicy(p *policy.NodeAdmissionPolicy, tenant *policy.TenantPolicy) *policy.RevisionPolicy {
	t := g.T
	choose := func(usual []string, odd string, label string) string {
		if len(usual) == 0 || g.odd(6, label+".odd") {
			return odd
		}
		return Pick(t, usual, label)
	}
	var offered []string
	for _, cell := range p.CellClasses {
		for _, f := range cell.Features {
			if !slices.Contains(offered, f) {
				offered = append(offered, f)
			}
		}
	}
	var features []string
	if Chance(t, 1, 3, "rev.features.some") {
		features = (Generator{T: t}).subset(offered, "rev.features")
	}
	if g.odd(12, "rev.features.tpu") {
		features = append(features, "tpu")
	}
	threading := policy.SingleThreaded
	if Chance(t, 1, 3, "rev.threading.multi") {
		threading = policy.MultiThreaded
	}
	if g.odd(12, "rev.threading.none") {
		threading = 0
	}
	rp := &policy.RevisionPolicy{
		TrustClass:        choose(tenant.TrustClasses, Pick(t, []string{"ghost", "standard", "privileged"}, "rev.trust.odd"), "rev.trust"),
		Backend:           choose(p.Node.Backends, "gpu", "rev.backend"),
		Threading:         threading,
		StateModel:        choose(p.Node.StateModels, "durable", "rev.state_model"),
		Features:          features,
		CallDepthLimit:    uint32(Int(t, 0, 4, "rev.call_depth")),
		CapsuleCeiling:    g.ceiling("rev.capsule"),
		DeploymentCeiling: g.ceiling("rev.deployment"),
	}
	if g.odd(4, "rev.placement") {
		rp.Placement = policy.PlacementRestriction{
			Architectures: g.subset([]string{"x86_64", "arm64"}, "rev.placement.architectures"),
			Regions:       g.subset([]string{"eu", "us"}, "rev.placement.regions"),
			Zones:         g.subset([]string{"a", "b"}, "rev.placement.zones"),
		}
	}
	return rp
}

// Sources draws 1 to 3 generations of deployed revisions. Every
// generation deploys the same routes of every tenant with newly drawn
// policies; the returned list is every identity any generation holds,
// which requests draw from.
func (g Generator) Sources(p *policy.NodeAdmissionPolicy) ([]*Source, []policy.ResolvedRevision) {
	t := g.T
	var sources []*Source
	var all []policy.ResolvedRevision
	for gen := 1; gen <= Int(t, 1, 3, "generations"); gen++ {
		s := &Source{}
		for ti := range p.Tenants {
			tp := &p.Tenants[ti]
			for _, route := range []string{"r1", "r2"}[:Int(t, 1, 2, "routes")] {
				rev := policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: tp.ID, Service: "svc", Route: route, Contract: "c.v1", Function: "fn",
					Revision: fmt.Sprintf("rev-%s-%d", route, gen), Release: fmt.Sprintf("rel-%s-%d", route, gen), Generation: uint64(gen)}}
				s.Entries = append(s.Entries, Entry{Revision: rev, Policy: g.revisionPolicy(p, tp)})
				all = append(all, rev)
			}
		}
		sources = append(sources, s)
	}
	return sources, all
}
