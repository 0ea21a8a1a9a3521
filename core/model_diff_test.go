package core_test

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/policy"
)

// This file holds core to internal/model, the reference implementation:
// random policies, random revision sources and random sequences of
// admissions (valid and every kind of invalid), permit operations, load
// publishes and clock advances run against both, and after every step
// both give the same answer and the same snapshot of every scope.

// diffEpoch is the virtual time every sequence starts at.
var diffEpoch = time.UnixMilli(1767225600000)

// settableClock is a clock both implementations read on their live paths.
type settableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *settableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *settableClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *settableClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// tableSource is an immutable in-memory RevisionPolicySource: one
// generation of deployed revisions, each a full identity tuple.
type tableSource struct {
	entries []tableEntry
}

type tableEntry struct {
	rev    policy.ResolvedRevision
	policy *policy.RevisionPolicy
}

func (s *tableSource) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	for i := range s.entries {
		e := &s.entries[i].rev
		if e.Tenant == rev.Tenant && e.Service == rev.Service && e.Route == rev.Route && e.Contract == rev.Contract &&
			e.Function == rev.Function && e.Revision == rev.Revision && e.Release == rev.Release && e.Generation == rev.Generation {
			return s.entries[i].policy, true
		}
	}
	return nil, false
}

// Vocabulary the generators draw names from. Names outside the policy
// ("hooli", "ghost", "gpu", "tpu") exercise the unknown-name rows.
var (
	diffTenants      = []string{"acme", "globex", "initech"}
	diffTrustClasses = []string{"standard", "privileged"}
	diffQueueClasses = []string{"batch", "online", "urgent"}
	diffFeatures     = []string{"simd", "threads"}
	diffPrincipals   = []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}, {Kind: "service", Subject: "billing"}, {Kind: "user", Subject: "bob"}}
	diffIDs          = []string{"a1", "a2", "a3", "a4", "a5"}
)

func intn(t *rapid.T, lo, hi int, label string) int { return rapid.IntRange(lo, hi).Draw(t, label) }

// chance is true with probability about num/den. rapid favours small
// draws (and shrinks toward them), so the draw is arranged for a small
// value to mean the likelier outcome: that keeps rare branches rare and
// shrinks failures toward the ordinary path.
func chance(t *rapid.T, num, den int, label string) bool {
	v := intn(t, 0, 15, label)*16 + intn(t, 0, 15, label+".low")
	threshold := 256 * num / den
	if 2*num <= den {
		return v >= 256-threshold
	}
	return v < threshold
}

func pick[E any](t *rapid.T, from []E, label string) E { return rapid.SampledFrom(from).Draw(t, label) }

// pickFlat is pick for long lists: rapid favours small indexes, so the
// index is drawn in two digits of at most eight values each, which keeps
// the tail of the list reachable.
func pickFlat[E any](t *rapid.T, from []E, label string) E {
	groups := (len(from) + 7) / 8
	i := intn(t, 0, groups-1, label+".group")*8 + intn(t, 0, 7, label+".member")
	return from[i%len(from)]
}

// generator draws policies and revisions. A friendly generator draws
// only what lets ordinary requests through steps 1 to 12, so that most of
// its sequences exercise the ledger, capacity and feasibility; a hostile
// one also draws what nobody offers or permits, so that every rejection
// row is reached by configuration as well as by bad requests.
type generator struct {
	t        *rapid.T
	friendly bool
}

// odd is true one time in den, never for a friendly generator.
func (g generator) odd(den int, label string) bool { return !g.friendly && chance(g.t, 1, den, label) }

// subset keeps each element of all with probability 3/4; for a friendly
// generator, it keeps them all.
func (g generator) subset(all []string, label string) []string {
	var out []string
	for _, s := range all {
		if g.friendly || chance(g.t, 3, 4, label+"."+s) {
			out = append(out, s)
		}
	}
	return out
}

// nonEmpty is a subset that is empty only when odd.
func (g generator) nonEmpty(all []string, label string) []string {
	out := g.subset(all, label)
	if len(out) == 0 && len(all) > 0 && !g.odd(8, label+".empty") {
		out = []string{pick(g.t, all, label+".one")}
	}
	return out
}

// positive is 1 to hi, and 0 when odd.
func (g generator) positive(hi int, label string) uint64 {
	if g.odd(9, label+".zero") {
		return 0
	}
	return uint64(intn(g.t, 1, hi, label))
}

// limit draws one limit from choices, and zero (which disables admission
// at that scope) about one time in a hundred.
func (g generator) limit(choices []uint64, label string) uint64 {
	if chance(g.t, 1, 40, label+".zero") {
		return 0
	}
	return pick(g.t, choices, label)
}

// limits draws a scope's limits: a few slots, and fuel and memory for a
// few grants (which are at most 8 each).
func (g generator) limits(label string) policy.Limits {
	slots, amounts := []uint64{2, 3, 1, 4}, []uint64{16, 8, 24, 4}
	return policy.Limits{
		MaxLiveActivations:     g.limit(slots, label+".live"),
		MaxQueuedReservations:  g.limit(slots, label+".queued"),
		MaxReservedCPUFuel:     g.limit(amounts, label+".fuel"),
		MaxReservedMemoryBytes: g.limit(amounts, label+".memory"),
	}
}

// policy draws a small node policy that passes validation, with limits so
// small that capacity boundaries are hit often.
func (g generator) policy() *policy.NodeAdmissionPolicy {
	t := g.t
	maxPriority := intn(t, 0, 4, "node.maximum_priority")
	p := &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement: policy.Placement{
				Architecture: pick(t, []string{"x86_64", "arm64"}, "node.architecture"),
				Region:       pick(t, []string{"eu", "us"}, "node.region"),
				Zone:         pick(t, []string{"a", "b"}, "node.zone"),
			},
			Backends:    g.nonEmpty([]string{"wasm", "native"}, "node.backends"),
			StateModels: g.nonEmpty([]string{"stateless", "stateful"}, "node.state_models"),
			BudgetCeiling: policy.NodeBudgetCeiling{
				CPUFuel:     g.positive(8, "node.ceiling.fuel"),
				MemoryBytes: g.positive(8, "node.ceiling.memory"),
				WallTime:    pick(t, []time.Duration{2 * time.Second, 200 * time.Millisecond, 40 * time.Millisecond}, "node.ceiling.wall"),
			},
			Limits:                          g.limits("node.limits"),
			MaximumPayloadBytes:             uint64(intn(t, 0, 4, "node.payload")),
			MaximumPriority:                 uint32(maxPriority),
			MaximumIdentifierBytes:          uint32(intn(t, 10, 12, "node.identifier_bytes")),
			MaximumGeneratedIdentifierBytes: uint32(intn(t, 83, 86, "node.generated_identifier_bytes")),
			MaximumMetadataEntries:          uint32(intn(t, 0, 3, "node.metadata_entries")),
			MaximumMetadataBytes:            uint64(intn(t, 0, 16, "node.metadata_bytes")),
			Overload: policy.OverloadPolicy{
				CPUThreshold:          pick(t, []float64{0.9, 1, 0.5}, "node.cpu_threshold"),
				MemoryThreshold:       pick(t, []float64{0.9, 1, 0.5}, "node.memory_threshold"),
				MaximumObservationAge: pick(t, []time.Duration{5 * time.Second, time.Second, 100 * time.Millisecond}, "node.maximum_age"),
			},
			Deadline: policy.DeadlinePolicy{
				EstimatedServiceTime: pick(t, []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond}, "node.estimated_service"),
				MinimumExecutionTime: pick(t, []time.Duration{0, 5 * time.Millisecond}, "node.minimum_execution"),
				SafetyMargin:         pick(t, []time.Duration{0, 5 * time.Millisecond}, "node.safety_margin"),
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
	n := intn(t, 1, min(3, maxPriority+1), "queue_classes")
	var cuts []int
	if n > 1 {
		cuts = rapid.SliceOfNDistinct(rapid.IntRange(1, maxPriority), n-1, n-1, rapid.ID[int]).Draw(t, "queue_cuts")
		sort.Ints(cuts)
	}
	low := 0
	for i := 0; i < n; i++ {
		high := maxPriority + intn(t, 0, 2, "queue_overhang")
		if i < n-1 {
			high = cuts[i] - 1
		}
		p.QueueClasses = append(p.QueueClasses, policy.QueueClassPolicy{Name: diffQueueClasses[i],
			MinPriority: uint32(low), MaxPriority: uint32(high), MaxQueued: g.limit([]uint64{2, 3, 1, 4}, "queue.max_queued")})
		low = high + 1
	}
	classes := rapid.SliceOfNDistinct(rapid.IntRange(0, policy.NumCellClasses-1), 1, policy.NumCellClasses, rapid.ID[int]).Draw(t, "cell_classes")
	var cellNames []string
	for _, c := range classes {
		name := policy.CellClass(c).String()
		cellNames = append(cellNames, name)
		threading := []string{"single", "multi"}
		if !g.friendly {
			threading = pick(t, [][]string{{"single", "multi"}, {"single"}, {"multi"}}, "cell.threading")
		}
		p.CellClasses = append(p.CellClasses, policy.CellClassPolicy{Class: name, MemoryBytes: pick(t, []uint64{8, 6, 4, 2, 1}, "cell.memory"),
			Parallelism: uint64(intn(t, 1, 3, "cell.parallelism")), Threading: threading,
			Features: (generator{t: t}).subset(diffFeatures, "cell.features")})
	}
	for i := 0; i < intn(t, 1, len(diffTrustClasses), "trust_classes"); i++ {
		p.TrustClasses = append(p.TrustClasses, policy.TrustClassPolicy{Name: diffTrustClasses[i],
			CellClasses: g.nonEmpty(cellNames, "trust.cells"), Limits: g.limits("trust.limits")})
	}
	var trustNames []string
	for _, tc := range p.TrustClasses {
		trustNames = append(trustNames, tc.Name)
	}
	for i := 0; i < intn(t, 1, len(diffTenants), "tenants"); i++ {
		tenantPriority := maxPriority
		if chance(t, 1, 3, "tenant.priority.lower") {
			tenantPriority = intn(t, 0, maxPriority, "tenant.priority")
		}
		var principals []policy.PrincipalPolicy
		for _, pr := range diffPrincipals {
			if chance(t, 1, 2, "tenant.principal") {
				principals = append(principals, pr)
			}
		}
		if len(principals) == 0 && !g.odd(8, "tenant.principal.none") {
			principals = append(principals, pick(t, diffPrincipals, "tenant.principal.one"))
		}
		payload := uint64(intn(t, 0, 4, "tenant.payload"))
		if g.friendly {
			payload = max(payload, 1)
			p.Node.MaximumPayloadBytes = max(p.Node.MaximumPayloadBytes, 1)
		}
		p.Tenants = append(p.Tenants, policy.TenantPolicy{
			ID: diffTenants[i], Principals: principals,
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

func (g generator) ceiling(label string) policy.Ceiling {
	t := g.t
	var c policy.Ceiling
	if chance(t, 1, 3, label+".fuel.set") {
		c.CPUFuel = policy.Some(g.positive(8, label+".fuel"))
	}
	if chance(t, 1, 3, label+".memory.set") {
		c.MemoryBytes = policy.Some(g.positive(8, label+".memory"))
	}
	if chance(t, 1, 3, label+".wall.set") {
		c.WallTime = policy.Some(pick(t, []time.Duration{time.Second, 100 * time.Millisecond, 30 * time.Millisecond}, label+".wall"))
		if g.odd(6, label+".wall.zero") {
			c.WallTime = policy.Some[time.Duration](0)
		}
	}
	return c
}

// revisionPolicy draws a revision policy for tenant, mostly one the node
// and the tenant can run.
func (g generator) revisionPolicy(p *policy.NodeAdmissionPolicy, tenant *policy.TenantPolicy) *policy.RevisionPolicy {
	t := g.t
	choose := func(usual []string, odd string, label string) string {
		if len(usual) == 0 || g.odd(6, label+".odd") {
			return odd
		}
		return pick(t, usual, label)
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
	if chance(t, 1, 3, "rev.features.some") {
		features = (generator{t: t}).subset(offered, "rev.features")
	}
	if g.odd(12, "rev.features.tpu") {
		features = append(features, "tpu")
	}
	threading := policy.SingleThreaded
	if chance(t, 1, 3, "rev.threading.multi") {
		threading = policy.MultiThreaded
	}
	if g.odd(12, "rev.threading.none") {
		threading = 0
	}
	rp := &policy.RevisionPolicy{
		TrustClass:        choose(tenant.TrustClasses, pick(t, []string{"ghost", "standard", "privileged"}, "rev.trust.odd"), "rev.trust"),
		Backend:           choose(p.Node.Backends, "gpu", "rev.backend"),
		Threading:         threading,
		StateModel:        choose(p.Node.StateModels, "durable", "rev.state_model"),
		Features:          features,
		CallDepthLimit:    uint32(intn(t, 0, 4, "rev.call_depth")),
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

// sources draws 1 to 3 generations of deployed revisions. Every
// generation deploys the same routes of every tenant with newly drawn
// policies; the returned list is every identity any generation holds,
// which requests draw from.
func (g generator) sources(p *policy.NodeAdmissionPolicy) ([]*tableSource, []policy.ResolvedRevision) {
	t := g.t
	var sources []*tableSource
	var all []policy.ResolvedRevision
	for gen := 1; gen <= intn(t, 1, 3, "generations"); gen++ {
		s := &tableSource{}
		for ti := range p.Tenants {
			tp := &p.Tenants[ti]
			for _, route := range []string{"r1", "r2"}[:intn(t, 1, 2, "routes")] {
				rev := policy.ResolvedRevision{Tenant: tp.ID, Service: "svc", Route: route, Contract: "c.v1", Function: "fn",
					Revision: fmt.Sprintf("rev-%s-%d", route, gen), Release: fmt.Sprintf("rel-%s-%d", route, gen), Generation: uint64(gen)}
				s.entries = append(s.entries, tableEntry{rev: rev, policy: g.revisionPolicy(p, tp)})
				all = append(all, rev)
			}
		}
		sources = append(sources, s)
	}
	return sources, all
}

// permitPair is one admission as both implementations issued it.
type permitPair struct {
	core  *core.AdmissionPermit
	model *model.Permit
}

type executionPair struct {
	core  *core.ExecutionPermit
	model *model.Permit
}

// diffMachine drives core and the model through the same steps.
type diffMachine struct {
	policy    *policy.NodeAdmissionPolicy
	sources   []*tableSource
	revisions []policy.ResolvedRevision
	clock     *settableClock
	now       time.Time
	source    *tableSource // the controllers' current view; nil when none

	provider  *core.LocalQuotaProvider
	coreLoad  *core.NodeLoadState
	coreCtl   *core.AdmissionController
	model     *model.Model
	modelLoad *model.LoadState
	modelCtl  *model.Controller

	sequence   uint64    // of the last accepted sample
	observed   time.Time // of the last accepted sample
	permits    []permitPair
	executions []executionPair
	outcomes   map[string]int // answer -> count, for the coverage report
}

var diffKnownErrors = func() map[*core.Error]bool {
	m := map[*core.Error]bool{}
	for _, e := range core.AllErrors() {
		m[e] = true
	}
	return m
}()

func newDiffMachine(t *rapid.T, outcomes map[string]int) *diffMachine {
	g := generator{t: t, friendly: chance(t, 2, 3, "friendly")}
	p := g.policy()
	sources, revisions := g.sources(p)
	m := &diffMachine{policy: p, sources: sources, revisions: revisions, now: diffEpoch,
		clock: &settableClock{now: diffEpoch}, outcomes: outcomes}
	var err error
	if m.provider, err = core.NewLocalQuotaProvider(p); err != nil {
		t.Fatalf("core refused a valid policy: %v", err)
	}
	if m.model, err = model.New(p); err != nil {
		t.Fatalf("model refused a valid policy: %v", err)
	}
	m.coreLoad, m.modelLoad = core.NewNodeLoadState(), &model.LoadState{}
	m.source = sources[0]
	m.coreCtl = m.provider.Controller(sources[0], m.coreLoad, m.clock)
	m.modelCtl = m.model.Controller(sources[0], m.modelLoad, m.clock)
	if chance(t, 7, 8, "initial_sample") {
		m.sequence, m.observed = 1, diffEpoch
		if err := m.publishBoth(t, core.LoadSample{Sequence: 1, ObservedAt: diffEpoch, CPUPressure: 0.1, MemoryPressure: 0.1}); err != nil {
			t.Fatalf("the first sample was rejected: %v", err)
		}
	}
	return m
}

// actions are the machine's steps. rapid picks among the keys uniformly,
// so a step listed under several keys is weighted accordingly.
func (m *diffMachine) actions() map[string]func(*rapid.T) {
	weights := []struct {
		name   string
		weight int
		action func(*rapid.T)
	}{
		{"AdmitAt", 5, m.admitAt},
		{"AdmitNow", 1, m.admitNow},
		{"EnsureSchedulableAt", 1, m.ensureSchedulable},
		{"StartExecutionAt", 2, m.startAt},
		{"StartExecution", 1, m.startNow},
		{"Release", 2, m.release},
		{"ExecutionRelease", 2, m.releaseExecution},
		{"Publish", 1, m.publish},
		{"Clear", 1, m.clearLoad},
		{"Advance", 3, m.advance},
		{"WithPolicySource", 1, m.swapSource},
	}
	actions := map[string]func(*rapid.T){"": m.check}
	for _, w := range weights {
		for i := 0; i < w.weight; i++ {
			actions[fmt.Sprintf("%s#%d", w.name, i)] = w.action
		}
	}
	return actions
}

// request draws a request: mostly one an allowlisted principal of the
// revision's tenant would send, then, often, one way of breaking it.
func (m *diffMachine) request(t *rapid.T) *core.AdmissionRequest {
	rev := pick(t, m.revisions, "req.revision")
	if m.source != nil && chance(t, 7, 8, "req.revision.current") {
		rev = pick(t, m.source.entries, "req.revision.entry").rev
	}
	principal := core.Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: rev.Tenant}
	for _, tp := range m.policy.Tenants {
		if tp.ID == rev.Tenant && len(tp.Principals) > 0 {
			allowed := pick(t, tp.Principals, "req.principal")
			kind, _ := policy.ParsePrincipalKind(allowed.Kind)
			principal.Kind, principal.Subject = kind, allowed.Subject
		}
	}
	if principal.Kind == policy.ServicePrincipal {
		principal.Service = "svc-api"
	}
	req := &core.AdmissionRequest{
		ActivationID: pick(t, diffIDs, "req.id"),
		Principal:    principal,
		Revision:     rev,
		RequestedBudget: policy.Budget{
			CPUFuel:     uint64(intn(t, 1, 9, "req.fuel")),
			MemoryBytes: uint64(intn(t, 1, 9, "req.memory")),
		},
		PayloadBytes: uint64(intn(t, 0, 1, "req.payload")),
		Priority:     uint32(intn(t, 0, int(m.policy.Node.MaximumPriority), "req.priority")),
	}
	for _, tp := range m.policy.Tenants {
		if tp.ID == rev.Tenant && req.Priority > tp.MaximumPriority && chance(t, 3, 4, "req.priority.permitted") {
			req.Priority = tp.MaximumPriority
		}
	}
	if chance(t, 1, 2, "req.wall.set") {
		req.RequestedBudget.WallTime = policy.Some(pick(t, []time.Duration{time.Second, time.Hour, 100 * time.Millisecond, 20 * time.Millisecond}, "req.wall"))
	}
	if chance(t, 1, 3, "req.deadline.set") {
		ahead := pick(t, []int64{3000, 1000, 200, 50, 5}, "req.deadline") + int64(intn(t, 0, 3, "req.deadline.jitter"))
		req.Deadline = policy.Some(m.now.UnixMilli() + ahead)
	}
	if chance(t, 1, 3, "req.break") {
		m.breakRequest(t, req)
	}
	return req
}

// breakRequest applies one of the ways a request can be wrong.
func (m *diffMachine) breakRequest(t *rapid.T, req *core.AdmissionRequest) {
	node := &m.policy.Node
	tooLong := strings.Repeat("x", int(node.MaximumIdentifierBytes)+1)
	badIdentifiers := []string{"", "a b", "a\tb", "a\u2003b", "a\u0085b", "a\x01b", "a\x7fb", "a\xffb", "\xc3", "é\xa0", tooLong,
		strings.Repeat("é", int(node.MaximumIdentifierBytes)/2+1)}
	badID := func() string { return pick(t, badIdentifiers, "bad_identifier") }
	badGenerated := []string{"", "r v", strings.Repeat("g", int(node.MaximumGeneratedIdentifierBytes)+1), "g\x00"}
	switch pickFlat(t, []string{
		"metadata-entries", "metadata-bytes", "metadata-at-bound", "activation-id", "subject", "tenant", "service", "rev-tenant", "rev-service",
		"rev-route", "rev-contract", "rev-function", "rev-id", "release-id", "egress", "storage", "outbound",
		"anonymous", "no-kind", "unknown-tenant", "other-tenant", "wrong-subject", "wrong-kind", "service-without-service",
		"claims", "node-priority", "tenant-priority", "forged-route", "forged-contract", "forged-function", "forged-revision",
		"forged-release", "forged-generation", "zero-fuel", "zero-memory", "zero-wall", "negative-wall", "huge-budget",
		"node-payload", "payload", "deadline-now", "deadline-past", "deadline-far-past", "deadline-far-future", "deadline-soon",
		"revision-attributes",
	}, "break") {
	case "metadata-entries":
		req.Attributes = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
	case "metadata-bytes":
		req.Principal.Claims = map[string]string{"k": strings.Repeat("v", 16)}
	case "metadata-at-bound":
		if node.MaximumMetadataEntries > 0 && node.MaximumMetadataBytes > 0 {
			req.Attributes = map[string]string{"k": strings.Repeat("v", int(node.MaximumMetadataBytes)-1)}
		}
	case "activation-id":
		req.ActivationID = badID()
	case "subject":
		req.Principal.Subject = badID()
	case "tenant":
		req.Principal.Tenant = badID()
	case "service":
		if s := badID(); s != "" {
			req.Principal.Service = s
		}
	case "rev-tenant":
		req.Revision.Tenant = badID()
	case "rev-service":
		req.Revision.Service = badID()
	case "rev-route":
		req.Revision.Route = badID()
	case "rev-contract":
		req.Revision.Contract = badID()
	case "rev-function":
		req.Revision.Function = badID()
	case "rev-id":
		req.Revision.Revision = pick(t, badGenerated, "bad_generated")
	case "release-id":
		req.Revision.Release = pick(t, badGenerated, "bad_generated")
	case "egress":
		req.RequestedBudget.NetworkEgressBytes = 1
	case "storage":
		req.RequestedBudget.StorageBytes = 1
	case "outbound":
		req.RequestedBudget.OutboundCalls = 1
	case "anonymous":
		req.Principal.Kind = policy.AnonymousPrincipal
	case "no-kind":
		req.Principal.Kind = pick(t, []policy.PrincipalKind{0, 7}, "kind")
	case "unknown-tenant":
		req.Principal.Tenant, req.Revision.Tenant = "hooli", "hooli"
	case "other-tenant":
		req.Principal.Tenant = pick(t, diffTenants, "other_tenant")
	case "wrong-subject":
		req.Principal.Subject = "mallory"
	case "wrong-kind":
		if req.Principal.Kind == policy.UserPrincipal {
			req.Principal.Kind, req.Principal.Service = policy.ServicePrincipal, "svc-api"
		} else {
			req.Principal.Kind = policy.UserPrincipal
		}
	case "service-without-service":
		req.Principal.Service = ""
	case "claims":
		req.Principal.Subject = "mallory"
		req.Principal.Claims = map[string]string{"role": "admin"}
	case "node-priority":
		req.Priority = node.MaximumPriority + uint32(intn(t, 1, 2, "over"))
	case "tenant-priority":
		for _, tp := range m.policy.Tenants {
			if tp.ID == req.Principal.Tenant {
				req.Priority = tp.MaximumPriority + 1
			}
		}
	case "forged-route":
		req.Revision.Route = pick(t, []string{"r1", "r2", "r3"}, "route")
	case "forged-contract":
		req.Revision.Contract = "c.v2"
	case "forged-function":
		req.Revision.Function = "other"
	case "forged-revision":
		req.Revision.Revision = pick(t, []string{"rev-r1-1", "rev-r2-2", "rev-forged"}, "revision")
	case "forged-release":
		req.Revision.Release = pick(t, []string{"rel-r1-1", "rel-r1-2", "rel-forged"}, "release")
	case "forged-generation":
		req.Revision.Generation = uint64(intn(t, 0, 4, "generation"))
	case "zero-fuel":
		req.RequestedBudget.CPUFuel = 0
	case "zero-memory":
		req.RequestedBudget.MemoryBytes = 0
	case "zero-wall":
		req.RequestedBudget.WallTime = policy.Some[time.Duration](0)
	case "negative-wall":
		req.RequestedBudget.WallTime = policy.Some(-time.Duration(intn(t, 1, 1000, "negative")))
	case "huge-budget":
		req.RequestedBudget.CPUFuel, req.RequestedBudget.MemoryBytes = math.MaxUint64, math.MaxUint64
		req.RequestedBudget.WallTime = policy.Some[time.Duration](math.MaxInt64)
	case "node-payload":
		req.PayloadBytes = node.MaximumPayloadBytes + 1
	case "payload":
		req.PayloadBytes = uint64(intn(t, 0, 5, "payload"))
	case "deadline-now":
		req.Deadline = policy.Some(m.now.UnixMilli())
	case "deadline-past":
		req.Deadline = policy.Some(m.now.UnixMilli() - int64(intn(t, 1, 5000, "past")))
	case "deadline-far-past":
		req.Deadline = policy.Some[int64](math.MinInt64)
	case "deadline-far-future":
		req.Deadline = policy.Some[int64](math.MaxInt64)
	case "deadline-soon":
		req.Deadline = policy.Some(m.now.UnixMilli() + int64(intn(t, 1, 40, "soon")))
	case "revision-attributes":
		req.Revision.Attributes = map[string]string{"trust_class": "privileged"}
	}
}

func (m *diffMachine) admitAt(t *rapid.T) {
	req := m.request(t)
	now := m.now
	if chance(t, 1, 4, "admit.sub_ms") {
		now = now.Add(time.Duration(intn(t, 1, 999_999, "admit.ns")))
	}
	cp, cerr := m.coreCtl.AdmitAt(req, now)
	mp, merr := m.modelCtl.AdmitAt(req, now)
	m.compareAdmission(t, "AdmitAt", cp, cerr, mp, merr)
}

func (m *diffMachine) admitNow(t *rapid.T) {
	req := m.request(t)
	cp, cerr := m.coreCtl.AdmitNow(req)
	mp, merr := m.modelCtl.AdmitNow(req)
	m.compareAdmission(t, "AdmitNow", cp, cerr, mp, merr)
}

func (m *diffMachine) compareAdmission(t *rapid.T, op string, cp *core.AdmissionPermit, cerr error, mp *model.Permit, merr error) {
	compareErrors(t, op, cerr, merr)
	if cerr != nil {
		m.outcomes[cerr.Error()[17:]]++
		if cp != nil || mp != nil {
			t.Fatalf("%s: a rejection returned a permit", op)
		}
		return
	}
	m.outcomes["admitted"]++
	if cp.ActivationID() != mp.ActivationID() || cp.Tenant() != mp.Tenant() || cp.Revision() != mp.Revision() {
		t.Fatalf("%s: identity: core %q %q %+v, model %q %q %+v", op, cp.ActivationID(), cp.Tenant(), cp.Revision(),
			mp.ActivationID(), mp.Tenant(), mp.Revision())
	}
	if cp.EffectiveBudget() != mp.EffectiveBudget() {
		t.Fatalf("%s: budget: core %+v, model %+v", op, cp.EffectiveBudget(), mp.EffectiveBudget())
	}
	if !cp.Deadline().Equal(mp.Deadline()) {
		t.Fatalf("%s: deadline: core %v, model %v", op, cp.Deadline(), mp.Deadline())
	}
	co, mo := cp.Obligations(), mp.Obligations()
	if co.CellClass != mo.CellClass || co.QueueClass != mo.QueueClass || co.TrustClass != mo.TrustClass || co.Priority != mo.Priority ||
		co.Backend != mo.Backend || co.Threading != mo.Threading || co.StateModel != mo.StateModel ||
		!slices.Equal(co.Features, mo.Features) || co.CallDepthLimit != mo.CallDepthLimit {
		t.Fatalf("%s: obligations: core %+v, model %+v", op, co, mo)
	}
	m.permits = append(m.permits, permitPair{core: cp, model: mp})
}

// compareErrors holds core's answer to the model's: both nil, or the same
// code, scope, dimension, reason, retryability and text, and core's one
// of its preallocated values.
func compareErrors(t *rapid.T, op string, cerr, merr error) {
	if cerr == nil && merr == nil {
		return
	}
	if cerr == nil || merr == nil {
		t.Fatalf("%s: core answered %v, model answered %v", op, cerr, merr)
	}
	ce, ok := cerr.(*core.Error)
	if !ok || !diffKnownErrors[ce] {
		t.Fatalf("%s: core returned %T %v, not a preallocated *core.Error", op, cerr, cerr)
	}
	me, ok := merr.(*model.Rejection)
	if !ok {
		t.Fatalf("%s: model returned %T %v", op, merr, merr)
	}
	if string(ce.Code) != me.Code || string(ce.Scope) != me.Scope || string(ce.Dimension) != me.Dimension ||
		string(ce.Reason) != me.Reason || ce.Retryable != me.Retryable || ce.Error() != me.Error() {
		t.Fatalf("%s: core answered %q, model answered %q", op, ce.Error(), me.Error())
	}
}

// offset draws a time near now, around the edges a permit deadline has.
func (m *diffMachine) offset(t *rapid.T, label string) time.Time {
	return m.now.Add(pick(t, []time.Duration{0, time.Nanosecond, 10 * time.Millisecond, 39 * time.Millisecond,
		40 * time.Millisecond, 200 * time.Millisecond, 3 * time.Second}, label))
}

func (m *diffMachine) ensureSchedulable(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := pick(t, m.permits, "permit")
	at := m.offset(t, "ensure.at")
	compareErrors(t, "EnsureSchedulableAt", pp.core.EnsureSchedulableAt(at), pp.model.EnsureSchedulableAt(at))
}

func (m *diffMachine) startAt(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := pick(t, m.permits, "permit")
	at := m.offset(t, "start.at")
	ce, cerr := pp.core.StartExecutionAt(at)
	me, merr := pp.model.StartExecutionAt(at)
	m.compareStart(t, "StartExecutionAt", ce, cerr, me, merr)
}

func (m *diffMachine) startNow(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := pick(t, m.permits, "permit")
	ce, cerr := pp.core.StartExecution()
	me, merr := pp.model.StartExecution()
	m.compareStart(t, "StartExecution", ce, cerr, me, merr)
}

func (m *diffMachine) compareStart(t *rapid.T, op string, ce *core.ExecutionPermit, cerr error, me *model.Permit, merr error) {
	compareErrors(t, op, cerr, merr)
	if cerr != nil {
		m.outcomes["start:"+string(cerr.(*core.Error).Reason)]++
		return
	}
	m.outcomes["started"]++
	if ce.ActivationID() != me.ActivationID() || !ce.Deadline().Equal(me.Deadline()) || ce.EffectiveBudget() != me.EffectiveBudget() {
		t.Fatalf("%s: the execution permits differ", op)
	}
	m.executions = append(m.executions, executionPair{core: ce, model: me})
}

func (m *diffMachine) release(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := pick(t, m.permits, "permit")
	if c, mo := pp.core.Release(), pp.model.Release(); c != mo {
		t.Fatalf("Release: core %v, model %v", c, mo)
	}
}

func (m *diffMachine) releaseExecution(t *rapid.T) {
	if len(m.executions) == 0 {
		t.Skip("no execution")
	}
	ep := pick(t, m.executions, "execution")
	if c, mo := ep.core.Release(), ep.model.Release(); c != mo {
		t.Fatalf("ExecutionPermit.Release: core %v, model %v", c, mo)
	}
}

func (m *diffMachine) publishBoth(t *rapid.T, s core.LoadSample) error {
	err := m.coreLoad.Publish(s)
	compareErrors(t, "Publish", err, m.modelLoad.Publish(s))
	return err
}

// publish draws a sample that is usually good and sometimes broken in one
// of the ways a sampler can get it wrong, and publishes it to both.
func (m *diffMachine) publish(t *rapid.T) {
	observed := m.now.Add(-pick(t, []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second}, "publish.age"))
	if observed.Before(m.observed) {
		observed = m.observed // observations never go back
	}
	s := core.LoadSample{
		Sequence:       m.sequence + pick(t, []uint64{1, 2}, "publish.sequence_step"),
		ObservedAt:     observed,
		CPUPressure:    pick(t, []float64{0, 0.3, 0.49}, "publish.cpu"),
		MemoryPressure: pick(t, []float64{0, 0.3, 0.49}, "publish.memory"),
	}
	if chance(t, 1, 3, "publish.delay") {
		s.QueueDelay[intn(t, 0, policy.NumCellClasses-1, "publish.delay.class")] = pick(t,
			[]time.Duration{10 * time.Millisecond, 300 * time.Millisecond, time.Hour, math.MaxInt64}, "publish.delay.value")
	}
	if chance(t, 1, 4, "publish.odd") {
		switch pickFlat(t, []string{"cpu-nan", "memory-nan", "cpu-negative", "memory-above-one", "cpu-infinite",
			"cpu-at-threshold", "memory-at-threshold", "cpu-one", "negative-delay", "same-sequence", "older-sequence",
			"older-observation", "future-dated", "just-future", "stale", "just-stale"}, "publish.how") {
		case "cpu-nan":
			s.CPUPressure = math.NaN()
		case "memory-nan":
			s.MemoryPressure = math.NaN()
		case "cpu-negative":
			s.CPUPressure = -0.1
		case "memory-above-one":
			s.MemoryPressure = 1.0000001
		case "cpu-infinite":
			s.CPUPressure = math.Inf(1)
		case "cpu-at-threshold":
			s.CPUPressure = m.policy.Node.Overload.CPUThreshold
		case "memory-at-threshold":
			s.MemoryPressure = m.policy.Node.Overload.MemoryThreshold
		case "cpu-one":
			s.CPUPressure = 1
		case "negative-delay":
			s.QueueDelay[intn(t, 0, policy.NumCellClasses-1, "publish.delay.class")] = -time.Nanosecond
		case "same-sequence":
			s.Sequence = m.sequence
		case "older-sequence":
			s.Sequence = m.sequence - min(m.sequence, 1)
		case "older-observation":
			s.ObservedAt = m.observed.Add(-time.Nanosecond)
		case "future-dated":
			s.ObservedAt = m.now.Add(time.Second)
		case "just-future":
			s.ObservedAt = m.now.Add(time.Nanosecond)
		case "stale":
			s.ObservedAt = m.now.Add(-m.policy.Node.Overload.MaximumObservationAge - time.Second)
		case "just-stale":
			s.ObservedAt = m.now.Add(-m.policy.Node.Overload.MaximumObservationAge - time.Nanosecond)
		}
	}
	if err := m.publishBoth(t, s); err == nil {
		m.sequence, m.observed = s.Sequence, s.ObservedAt
	}
}

func (m *diffMachine) clearLoad(t *rapid.T) {
	if chance(t, 7, 8, "clear.skip") {
		t.Skip("a withdrawn sample is rarer than the other steps")
	}
	m.coreLoad.Clear()
	m.modelLoad.Clear()
}

// advance moves the clock forward and, like a sampler's tick, usually
// publishes a fresh good sample; without one the sample ages toward stale.
func (m *diffMachine) advance(t *rapid.T) {
	step := pick(t, []time.Duration{time.Nanosecond, time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond,
		150 * time.Millisecond, time.Second}, "advance")
	if chance(t, 1, 8, "advance.long") {
		step = pick(t, []time.Duration{3 * time.Second, time.Minute}, "advance.long.step")
	}
	m.now = m.now.Add(step)
	m.clock.set(m.now)
	if chance(t, 2, 3, "advance.sample") {
		s := core.LoadSample{Sequence: m.sequence + 1, ObservedAt: m.now, CPUPressure: 0.2, MemoryPressure: 0.2}
		if s.ObservedAt.Before(m.observed) {
			s.ObservedAt = m.observed // after a future-dated sample
		}
		if err := m.publishBoth(t, s); err == nil {
			m.sequence, m.observed = s.Sequence, s.ObservedAt
		}
	}
}

// swapSource is the stand-in for a catalog deploy, delete or restart: both
// controllers move to another pinned view and keep the ledger.
func (m *diffMachine) swapSource(t *rapid.T) {
	var src core.RevisionPolicySource // a nil view: every revision is unavailable
	m.source = nil
	if !chance(t, 1, 16, "source.none") {
		m.source = pick(t, m.sources, "source")
		src = m.source
	}
	m.coreCtl = m.coreCtl.WithPolicySource(src)
	m.modelCtl = m.modelCtl.WithPolicySource(src)
}

// check compares every snapshot of every scope, named or not.
func (m *diffMachine) check(t *rapid.T) {
	if c, mo := m.provider.NodeSnapshot(), m.model.NodeSnapshot(); c != mo {
		t.Fatalf("node snapshot: core %+v, model %+v", c, mo)
	}
	for _, name := range append(slices.Clone(diffTenants), "hooli", "") {
		c, cok := m.provider.TenantSnapshot(name)
		mo, mok := m.model.TenantSnapshot(name)
		if c != mo || cok != mok {
			t.Fatalf("tenant %q snapshot: core %+v %v, model %+v %v", name, c, cok, mo, mok)
		}
	}
	for _, name := range append(slices.Clone(diffTrustClasses), "ghost") {
		c, cok := m.provider.TrustClassSnapshot(name)
		mo, mok := m.model.TrustClassSnapshot(name)
		if c != mo || cok != mok {
			t.Fatalf("trust class %q snapshot: core %+v %v, model %+v %v", name, c, cok, mo, mok)
		}
	}
	for _, name := range append(slices.Clone(diffQueueClasses), "ghost") {
		cq, cmax, cok := m.provider.QueueClassSnapshot(name)
		mq, mmax, mok := m.model.QueueClassSnapshot(name)
		if cq != mq || cmax != mmax || cok != mok {
			t.Fatalf("queue class %q snapshot: core %d/%d %v, model %d/%d %v", name, cq, cmax, cok, mq, mmax, mok)
		}
	}
	for class := policy.CellClass(0); class <= policy.NumCellClasses; class++ {
		c, cok := m.provider.CellClassSnapshot(class)
		mo, mok := m.model.CellClassSnapshot(class)
		if c != mo || cok != mok {
			t.Fatalf("cell class %v snapshot: core %d %v, model %d %v", class, c, cok, mo, mok)
		}
	}
	if c, mo := m.provider.LiveReservations(), m.model.LiveReservations(); c != mo {
		t.Fatalf("live reservations: core %d, model %d", c, mo)
	}
	for i, pp := range m.permits {
		if pp.core.Live() != pp.model.Live() {
			t.Fatalf("permit %d: core live %v, model live %v", i, pp.core.Live(), pp.model.Live())
		}
	}
	for i, ep := range m.executions {
		if ep.core.Live() != ep.model.Live() {
			t.Fatalf("execution %d: core live %v, model live %v", i, ep.core.Live(), ep.model.Live())
		}
	}
}

// finish releases everything still held and checks both ledgers are empty.
func (m *diffMachine) finish(t *rapid.T) {
	for _, ep := range m.executions {
		if c, mo := ep.core.Release(), ep.model.Release(); c != mo {
			t.Fatalf("final execution release: core %v, model %v", c, mo)
		}
	}
	for _, pp := range m.permits {
		if c, mo := pp.core.Release(), pp.model.Release(); c != mo {
			t.Fatalf("final release: core %v, model %v", c, mo)
		}
	}
	m.check(t)
	if s := m.provider.NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		t.Fatalf("node not back to zero: %+v", s)
	}
}

// TestModelDifferential runs random sequences against core and the model.
// It runs rapid.Check twice (two independent seeds), so a plain go test
// runs at least 2 x -rapid.checks (default 100) sequences.
func TestModelDifferential(t *testing.T) {
	outcomes := map[string]int{}
	for _, name := range []string{"first", "second"} {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				m := newDiffMachine(rt, outcomes)
				// Three rounds of -rapid.steps (default 30) actions each:
				// long enough to fill and drain the small limits.
				for round := 0; round < 3; round++ {
					rt.Repeat(m.actions())
				}
				m.finish(rt)
			})
		})
	}
	var lines []string
	for k, v := range outcomes {
		lines = append(lines, fmt.Sprintf("%6d %s", v, k))
	}
	sort.Strings(lines)
	t.Logf("outcomes:\n%s", strings.Join(lines, "\n"))
}
