package policy

import (
	"time"

	"latent.dev/admission/internal/strictjson"
)

// Limits on the shape of a policy that keep compiled state small and the
// hot path's sets in one machine word.
const (
	// MaxNodeLiveActivations bounds node.limits.max_live_activations, which
	// sizes the live-activation table allocated at startup.
	MaxNodeLiveActivations = 1 << 20
	// MaxTrustClasses bounds the trust classes (a tenant's set is a bitset).
	MaxTrustClasses = 64
	// MaxFeatures bounds the distinct cell-class features (a bitset).
	MaxFeatures = 64
	// MaxCellParallelism bounds cell_classes[].parallelism: the node's
	// cell pool allocates that many cells at startup and refuses more, so
	// a policy that validates is one the pool can serve.
	MaxCellParallelism = 1 << 16
)

// Validate checks every rule of docs/policy-format.md and returns all violations as a
// [latent.dev/admission/problems.List], each with its JSON path, or nil.
func (p *NodeAdmissionPolicy) Validate() error { return p.validate(brokenInputs{}) }

// brokenInputs names parts of a decoded file that had structural problems:
// rules that depend on them would only report follow-on noise.
type brokenInputs struct {
	maximumPriority bool // node or node.maximum_priority
	cellClasses     bool // some cell class name could not be read
	trustClasses    bool // some trust class name could not be read
	tenants         bool // some tenant ID could not be read
}

func (p *NodeAdmissionPolicy) validate(broken brokenInputs) error {
	v := &validator{d: strictjson.NewDecoder(nil), p: p, broken: broken}
	v.node()
	v.queueClasses()
	cells := v.cellClasses()
	trust := v.trustClasses(cells)
	tenants := v.tenants(cells, trust)
	v.fleet(tenants)
	return v.d.Err()
}

type validator struct {
	d      *strictjson.Decoder
	p      *NodeAdmissionPolicy
	broken brokenInputs
}

func (v *validator) problem(path, format string, args ...any) {
	v.d.Problemf(path, format, args...)
}

func (v *validator) identifier(path, s string) {
	max := v.p.Node.MaximumIdentifierBytes
	if max == 0 {
		return // reported once, at node.maximum_identifier_bytes
	}
	if !ValidIdentifier(s, max) {
		v.problem(path, "is not a valid identifier (1 to %d bytes of UTF-8 without white space or control characters)", max)
	}
}

// uniqueNames checks each name is an identifier and appears once.
func (v *validator) uniqueNames(list string, field string, names []string) map[string]int {
	seen := make(map[string]int, len(names))
	for i, n := range names {
		path := strictjson.Index(list, i)
		if field != "" {
			path = strictjson.JoinKey(path, field)
		}
		v.identifier(path, n)
		if first, dup := seen[n]; dup {
			v.problem(path, "duplicates %s", strictjson.Index(list, first))
			continue
		}
		seen[n] = i
	}
	return seen
}

func (v *validator) node() {
	n := &v.p.Node
	if n.MaximumIdentifierBytes == 0 {
		v.problem("node.maximum_identifier_bytes", "must be positive")
	}
	if n.MaximumGeneratedIdentifierBytes < MinimumGeneratedIdentifierBytes {
		v.problem("node.maximum_generated_identifier_bytes", "must be at least %d", MinimumGeneratedIdentifierBytes)
	}
	v.identifier("node.placement.architecture", n.Placement.Architecture)
	v.identifier("node.placement.region", n.Placement.Region)
	v.identifier("node.placement.zone", n.Placement.Zone)
	v.uniqueNames("node.backends", "", n.Backends)
	v.uniqueNames("node.state_models", "", n.StateModels)
	if n.BudgetCeiling.WallTime <= 0 {
		v.problem("node.budget_ceiling.wall_time_ms", "must be positive")
	}
	if n.Limits.MaxLiveActivations > MaxNodeLiveActivations {
		v.problem("node.limits.max_live_activations", "must be at most %d", MaxNodeLiveActivations)
	}
	if n.MaximumPriority > MaxPriority {
		v.problem("node.maximum_priority", "must be at most %d", MaxPriority)
	}
	threshold := func(path string, f float64) {
		if !(f > 0 && f <= 1) {
			v.problem(path, "must be in (0, 1]")
		}
	}
	threshold("node.overload.cpu_threshold", n.Overload.CPUThreshold)
	threshold("node.overload.memory_threshold", n.Overload.MemoryThreshold)
	if n.Overload.MaximumObservationAge <= 0 {
		v.problem("node.overload.maximum_observation_age_ms", "must be positive")
	}
	// A decoded file cannot hold a negative duration, but a policy built
	// in code can; the feasibility arithmetic assumes none.
	for _, d := range []struct {
		path  string
		value time.Duration
	}{
		{"node.deadline.estimated_service_time_ms", n.Deadline.EstimatedServiceTime},
		{"node.deadline.minimum_execution_time_ms", n.Deadline.MinimumExecutionTime},
		{"node.deadline.safety_margin_ms", n.Deadline.SafetyMargin},
	} {
		if d.value < 0 {
			v.problem(d.path, "must not be negative")
		}
	}
}

func (v *validator) queueClasses() {
	names := make([]string, len(v.p.QueueClasses))
	for i, q := range v.p.QueueClasses {
		names[i] = q.Name
	}
	v.uniqueNames("queue_classes", "name", names)
	maxPriority := v.p.Node.MaximumPriority
	if maxPriority > MaxPriority || v.broken.maximumPriority {
		return
	}
	owner := make([]int, int(maxPriority)+1)
	for i := range owner {
		owner[i] = -1
	}
	for i, q := range v.p.QueueClasses {
		path := strictjson.Index("queue_classes", i)
		if q.MinPriority > q.MaxPriority {
			v.problem(path, "priority range is reversed (min_priority %d > max_priority %d)", q.MinPriority, q.MaxPriority)
			continue
		}
		if q.MinPriority > maxPriority {
			v.problem(path, "priority range is empty: it holds no priority up to node.maximum_priority (%d)", maxPriority)
			continue
		}
		top := min(q.MaxPriority, maxPriority)
		reported := false
		for pr := q.MinPriority; pr <= top; pr++ {
			if owner[pr] < 0 {
				owner[pr] = i
			} else if !reported {
				v.problem(path, "priority %d is already in %s", pr, strictjson.Index("queue_classes", owner[pr]))
				reported = true
			}
		}
	}
	for pr := 0; pr < len(owner); pr++ {
		if owner[pr] >= 0 {
			continue
		}
		end := pr
		for end+1 < len(owner) && owner[end+1] < 0 {
			end++
		}
		if end == pr {
			v.problem("queue_classes", "priority %d is in no queue class", pr)
		} else {
			v.problem("queue_classes", "priorities %d to %d are in no queue class", pr, end)
		}
		pr = end
	}
}

func (v *validator) cellClasses() map[string]int {
	seen := map[string]int{}
	features := map[string]bool{}
	for i, c := range v.p.CellClasses {
		path := strictjson.Index("cell_classes", i)
		if _, ok := ParseCellClass(c.Class); !ok {
			v.problem(path+".class", "must be one of tiny, small, standard, large, extra-large")
		} else if first, dup := seen[c.Class]; dup {
			v.problem(path+".class", "duplicates %s", strictjson.Index("cell_classes", first))
		} else {
			seen[c.Class] = i
		}
		if c.MemoryBytes == 0 {
			v.problem(path+".memory_bytes", "must be positive")
		}
		if c.Parallelism == 0 {
			v.problem(path+".parallelism", "must be positive")
		} else if c.Parallelism > MaxCellParallelism {
			v.problem(path+".parallelism", "must be at most %d", MaxCellParallelism)
		}
		if len(c.Threading) == 0 {
			v.problem(path+".threading", "must list at least one threading model")
		}
		threads := map[string]bool{}
		for j, t := range c.Threading {
			tp := strictjson.Index(path+".threading", j)
			if _, ok := ParseThreading(t); !ok {
				v.problem(tp, "must be single or multi")
			} else if threads[t] {
				v.problem(tp, "is listed twice")
			}
			threads[t] = true
		}
		v.uniqueNames(path+".features", "", c.Features)
		for _, f := range c.Features {
			features[f] = true
		}
	}
	if len(features) > MaxFeatures {
		v.problem("cell_classes", "names %d distinct features; at most %d are supported", len(features), MaxFeatures)
	}
	return seen
}

func (v *validator) references(path string, refs []string, known map[string]int, what string, knownBroken bool) {
	seen := map[string]bool{}
	for j, r := range refs {
		rp := strictjson.Index(path, j)
		if _, ok := known[r]; !ok {
			if knownBroken {
				continue
			}
			v.problem(rp, "is not a configured %s", what)
		} else if seen[r] {
			v.problem(rp, "is listed twice")
		}
		seen[r] = true
	}
}

func (v *validator) trustClasses(cells map[string]int) map[string]int {
	names := make([]string, len(v.p.TrustClasses))
	for i, t := range v.p.TrustClasses {
		names[i] = t.Name
	}
	known := v.uniqueNames("trust_classes", "name", names)
	if len(v.p.TrustClasses) > MaxTrustClasses {
		v.problem("trust_classes", "has %d entries; at most %d are supported", len(v.p.TrustClasses), MaxTrustClasses)
	}
	for i, t := range v.p.TrustClasses {
		v.references(strictjson.Index("trust_classes", i)+".cell_classes", t.CellClasses, cells, "cell class", v.broken.cellClasses)
	}
	return known
}

func (v *validator) tenants(cells, trust map[string]int) map[string]int {
	ids := make([]string, len(v.p.Tenants))
	for i, t := range v.p.Tenants {
		ids[i] = t.ID
	}
	known := v.uniqueNames("tenants", "id", ids)
	for i, t := range v.p.Tenants {
		path := strictjson.Index("tenants", i)
		seen := map[PrincipalPolicy]int{}
		for j, pr := range t.Principals {
			pp := strictjson.Index(path+".principals", j)
			kind, ok := ParsePrincipalKind(pr.Kind)
			switch {
			case !ok:
				v.problem(pp+".kind", "must be user or service")
			case kind == AnonymousPrincipal:
				v.problem(pp+".kind", "anonymous principals are never authorized; list user or service principals")
			}
			v.identifier(pp+".subject", pr.Subject)
			if first, dup := seen[pr]; dup {
				v.problem(pp, "duplicates %s", strictjson.Index(path+".principals", first))
			} else {
				seen[pr] = j
			}
		}
		v.references(path+".trust_classes", t.TrustClasses, trust, "trust class", v.broken.trustClasses)
		v.references(path+".cell_classes", t.CellClasses, cells, "cell class", v.broken.cellClasses)
	}
	return known
}

// fleet checks the fleet block: each tenant it marks is configured, and
// is marked once.
func (v *validator) fleet(tenants map[string]int) {
	v.references("fleet.tenants", v.p.Fleet.Tenants, tenants, "tenant", v.broken.tenants)
}
