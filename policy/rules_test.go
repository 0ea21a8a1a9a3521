package policy_test

import (
	"fmt"

	"latent.dev/admission/policy"
)

// ruleViolationCases are well-formed files that break one rule of docs/policy-format.md.
func ruleViolationCases() []ruleCase {
	return []ruleCase{
		// Unique names.
		{
			name: "duplicate queue class",
			edit: func(d *document) { d.set("queue_classes[1].name", "batch") },
			want: []want{{"queue_classes[1].name", "duplicates queue_classes[0]"}},
		},
		{
			name: "duplicate trust class",
			edit: func(d *document) { d.push("trust_classes", d.copyOf("trust_classes[0]")) },
			want: []want{{"trust_classes[2].name", "duplicates trust_classes[0]"}},
		},
		{
			name: "duplicate tenant",
			edit: func(d *document) { d.set("tenants[2].id", "acme") },
			want: []want{{"tenants[2].id", "duplicates tenants[0]"}},
		},
		{
			name: "duplicate cell class",
			edit: func(d *document) { d.push("cell_classes", d.copyOf("cell_classes[1]")) },
			want: []want{{"cell_classes[4].class", "duplicates cell_classes[1]"}},
		},
		{
			name: "duplicate backend",
			edit: func(d *document) { d.push("node.backends", "wasm") },
			want: []want{{"node.backends[1]", "duplicates node.backends[0]"}},
		},
		{
			name: "duplicate state model",
			edit: func(d *document) { d.push("node.state_models", "stateless") },
			want: []want{{"node.state_models[1]", "duplicates node.state_models[0]"}},
		},
		{
			name: "duplicate feature of one cell class",
			edit: func(d *document) { d.push("cell_classes[3].features", "simd") },
			want: []want{{"cell_classes[3].features[2]", "duplicates cell_classes[3].features[0]"}},
		},
		{
			name: "same feature on two cell classes is accepted",
			edit: func(d *document) { d.push("cell_classes[0].features", "threads") },
		},
		{
			name: "duplicate principal",
			edit: func(d *document) {
				d.push("tenants[0].principals", map[string]any{"kind": "user", "subject": "alice"})
			},
			want: []want{{"tenants[0].principals[2]", "duplicates tenants[0].principals[0]"}},
		},
		{
			name: "same subject as user and service is accepted",
			edit: func(d *document) {
				d.push("tenants[0].principals", map[string]any{"kind": "service", "subject": "alice"})
			},
		},
		{
			name: "same principal on two tenants is accepted",
			edit: func(d *document) {
				d.push("tenants[1].principals", map[string]any{"kind": "user", "subject": "alice"})
			},
		},
		{
			name: "threading model listed twice",
			edit: func(d *document) { d.push("cell_classes[3].threading", "multi") },
			want: []want{{"cell_classes[3].threading[2]", "is listed twice"}},
		},
		{
			name: "tenant lists a trust class twice",
			edit: func(d *document) { d.push("tenants[0].trust_classes", "standard") },
			want: []want{{"tenants[0].trust_classes[1]", "is listed twice"}},
		},
		{
			name: "tenant lists a cell class twice",
			edit: func(d *document) { d.push("tenants[0].cell_classes", "tiny") },
			want: []want{{"tenants[0].cell_classes[3]", "is listed twice"}},
		},
		{
			name: "trust class lists a cell class twice",
			edit: func(d *document) { d.push("trust_classes[0].cell_classes", "small") },
			want: []want{{"trust_classes[0].cell_classes[3]", "is listed twice"}},
		},

		// References and the fixed cell classes.
		{
			name: "unknown cell class name",
			edit: func(d *document) {
				c := d.copyOf("cell_classes[0]")
				c["class"] = "huge"
				d.push("cell_classes", c)
			},
			want: []want{{"cell_classes[4].class", "must be one of tiny, small, standard, large, extra-large"}},
		},
		{
			name: "cell class names are case sensitive",
			edit: func(d *document) {
				c := d.copyOf("cell_classes[0]")
				c["class"] = "Large"
				d.push("cell_classes", c)
			},
			want: []want{{"cell_classes[4].class", "must be one of tiny, small, standard, large, extra-large"}},
		},
		{
			name: "fifth cell class is accepted",
			edit: func(d *document) {
				c := d.copyOf("cell_classes[0]")
				c["class"] = "large"
				d.push("cell_classes", c)
			},
		},
		{
			name: "tenant references an unconfigured trust class",
			edit: func(d *document) { d.push("tenants[0].trust_classes", "gold") },
			want: []want{{"tenants[0].trust_classes[1]", "is not a configured trust class"}},
		},
		{
			name: "tenant references an unconfigured cell class",
			edit: func(d *document) { d.push("tenants[0].cell_classes", "large") },
			want: []want{{"tenants[0].cell_classes[3]", "is not a configured cell class"}},
		},
		{
			name: "tenant references a name that is no cell class",
			edit: func(d *document) { d.push("tenants[0].cell_classes", "huge") },
			want: []want{{"tenants[0].cell_classes[3]", "is not a configured cell class"}},
		},
		{
			name: "trust class references an unconfigured cell class",
			edit: func(d *document) { d.push("trust_classes[0].cell_classes", "large") },
			want: []want{{"trust_classes[0].cell_classes[3]", "is not a configured cell class"}},
		},
		{
			name: "cell class memory_bytes is zero",
			edit: func(d *document) { d.set("cell_classes[0].memory_bytes", 0) },
			want: []want{{"cell_classes[0].memory_bytes", "must be positive"}},
		},
		{
			name: "cell class parallelism is zero",
			edit: func(d *document) { d.set("cell_classes[0].parallelism", 0) },
			want: []want{{"cell_classes[0].parallelism", "must be positive"}},
		},
		{
			name: "cell class parallelism over MaxCellParallelism",
			edit: func(d *document) { d.set("cell_classes[0].parallelism", policy.MaxCellParallelism+1) },
			want: []want{{"cell_classes[0].parallelism", fmt.Sprintf("must be at most %d", policy.MaxCellParallelism)}},
		},
		{
			name: "cell class parallelism of MaxCellParallelism is accepted",
			edit: func(d *document) { d.set("cell_classes[0].parallelism", policy.MaxCellParallelism) },
		},
		{
			name: "cell class threading is empty",
			edit: func(d *document) { d.set("cell_classes[0].threading", []any{}) },
			want: []want{{"cell_classes[0].threading", "must list at least one threading model"}},
		},
		{
			name: "cell class threading value is unknown",
			edit: func(d *document) { d.set("cell_classes[0].threading", []any{"triple"}) },
			want: []want{{"cell_classes[0].threading[0]", "must be single or multi"}},
		},
		{
			name: "multi-threaded only cell class is accepted",
			edit: func(d *document) { d.set("cell_classes[3].threading", []any{"multi"}) },
		},

		// Priorities and queue classes.
		{
			name: "one priority in no queue class",
			edit: func(d *document) { d.set("queue_classes[1].min_priority", 6) },
			want: []want{{"queue_classes", "priority 5 is in no queue class"}},
		},
		{
			name: "several priorities in no queue class",
			edit: func(d *document) { d.set("queue_classes[0].max_priority", 2) },
			want: []want{{"queue_classes", "priorities 3 to 4 are in no queue class"}},
		},
		{
			name: "a gap ends where the first queue class begins",
			edit: func(d *document) { d.set("queue_classes[0].min_priority", 3) },
			want: []want{{"queue_classes", "priorities 0 to 2 are in no queue class"}},
		},
		{
			name: "a gap is reported once with its whole range",
			edit: func(d *document) {
				d.set("queue_classes[0].max_priority", 1)
				d.set("queue_classes[1].min_priority", 7)
			},
			want: []want{{"queue_classes", "priorities 2 to 6 are in no queue class"}},
		},
		{
			name: "top priority in no queue class",
			edit: func(d *document) { d.set("queue_classes[1].max_priority", 8) },
			want: []want{{"queue_classes", "priority 9 is in no queue class"}},
		},
		{
			name: "priority in two queue classes",
			edit: func(d *document) { d.push("queue_classes", queueClass("overlap", 3, 4)) },
			want: []want{{"queue_classes[2]", "priority 3 is already in queue_classes[0]"}},
		},
		{
			name: "overlap does not leave the rest of the range uncovered",
			edit: func(d *document) { d.set("queue_classes[1].min_priority", 4) },
			want: []want{{"queue_classes[1]", "priority 4 is already in queue_classes[0]"}},
		},
		{
			name: "reversed queue class range",
			edit: func(d *document) { d.push("queue_classes", queueClass("reversed", 3, 2)) },
			want: []want{{"queue_classes[2]", "priority range is reversed (min_priority 3 > max_priority 2)"}},
		},
		{
			name: "queue class range above the node maximum priority is empty",
			edit: func(d *document) { d.push("queue_classes", queueClass("above", 10, 12)) },
			want: []want{{"queue_classes[2]", "priority range is empty: it holds no priority up to node.maximum_priority (9)"}},
		},
		{
			name: "a queue class starting at the node maximum priority is accepted",
			edit: func(d *document) {
				d.set("queue_classes[1].max_priority", 8)
				d.push("queue_classes", queueClass("top", 9, 12))
			},
		},
		{
			name: "single-priority queue class is accepted",
			edit: func(d *document) {
				d.set("queue_classes[1].min_priority", 6)
				d.push("queue_classes", queueClass("five", 5, 5))
			},
		},

		// Node ceilings and allowances.
		{
			name: "wall_time_ms is zero",
			edit: func(d *document) { d.set("node.budget_ceiling.wall_time_ms", 0) },
			want: []want{{"node.budget_ceiling.wall_time_ms", "must be positive"}},
		},
		{
			name: "maximum_generated_identifier_bytes is 82",
			edit: func(d *document) { d.set("node.maximum_generated_identifier_bytes", 82) },
			want: []want{{"node.maximum_generated_identifier_bytes", "must be at least 83"}},
		},
		{
			name: "maximum_generated_identifier_bytes of 83 is accepted",
			edit: func(d *document) { d.set("node.maximum_generated_identifier_bytes", 83) },
		},
		{
			name: "cpu_threshold is zero",
			edit: func(d *document) { d.set("node.overload.cpu_threshold", 0) },
			want: []want{{"node.overload.cpu_threshold", "must be in (0, 1]"}},
		},
		{
			name: "cpu_threshold of 1.0 is accepted",
			edit: func(d *document) { d.set("node.overload.cpu_threshold", num("1.0")) },
		},
		{
			name: "smallest positive threshold is accepted",
			edit: func(d *document) { d.set("node.overload.cpu_threshold", num("5e-324")) },
		},
		{
			name: "memory_threshold is 1.01",
			edit: func(d *document) { d.set("node.overload.memory_threshold", num("1.01")) },
			want: []want{{"node.overload.memory_threshold", "must be in (0, 1]"}},
		},
		{
			name: "memory_threshold is negative",
			edit: func(d *document) { d.set("node.overload.memory_threshold", num("-0.5")) },
			want: []want{{"node.overload.memory_threshold", "must be in (0, 1]"}},
		},
		{
			name: "threshold that overflows a float",
			edit: func(d *document) { d.set("node.overload.memory_threshold", num("1e400")) },
			want: []want{{"node.overload.memory_threshold", "is not a finite number"}},
		},
		{
			name: "maximum_observation_age_ms is zero",
			edit: func(d *document) { d.set("node.overload.maximum_observation_age_ms", 0) },
			want: []want{{"node.overload.maximum_observation_age_ms", "must be positive"}},
		},
		{
			name: "max_live_activations over MaxNodeLiveActivations",
			edit: func(d *document) { d.set("node.limits.max_live_activations", policy.MaxNodeLiveActivations+1) },
			want: []want{{"node.limits.max_live_activations", fmt.Sprintf("must be at most %d", policy.MaxNodeLiveActivations)}},
		},
		{
			name: "max_live_activations of MaxNodeLiveActivations is accepted",
			edit: func(d *document) { d.set("node.limits.max_live_activations", policy.MaxNodeLiveActivations) },
		},
		{
			name: "maximum_priority over MaxPriority",
			edit: func(d *document) { d.set("node.maximum_priority", policy.MaxPriority+1) },
			want: []want{{"node.maximum_priority", fmt.Sprintf("must be at most %d", policy.MaxPriority)}},
		},
		{
			name: "maximum_priority of MaxPriority is accepted",
			edit: func(d *document) {
				d.set("node.maximum_priority", policy.MaxPriority)
				d.set("queue_classes", []any{queueClass("all", 0, policy.MaxPriority)})
			},
		},
		{
			name: "a gap at the top of MaxPriority is reported",
			edit: func(d *document) {
				d.set("node.maximum_priority", policy.MaxPriority)
				d.set("queue_classes", []any{queueClass("most", 0, policy.MaxPriority-2)})
			},
			want: []want{{"queue_classes", fmt.Sprintf("priorities %d to %d are in no queue class", policy.MaxPriority-1, policy.MaxPriority)}},
		},
		{
			name: "maximum_identifier_bytes is zero",
			edit: func(d *document) { d.set("node.maximum_identifier_bytes", 0) },
			want: []want{{"node.maximum_identifier_bytes", "must be positive"}},
		},
		{
			name: "more than MaxTrustClasses trust classes",
			edit: func(d *document) { addTrustClasses(d, policy.MaxTrustClasses+1) },
			want: []want{{"trust_classes", fmt.Sprintf("has %d entries; at most %d are supported", policy.MaxTrustClasses+1, policy.MaxTrustClasses)}},
		},
		{
			name: "MaxTrustClasses trust classes are accepted",
			edit: func(d *document) { addTrustClasses(d, policy.MaxTrustClasses) },
		},
		{
			name: "more than MaxFeatures distinct features",
			edit: func(d *document) { addFeatures(d, policy.MaxFeatures+1) },
			want: []want{{"cell_classes", fmt.Sprintf("names %d distinct features; at most %d are supported", policy.MaxFeatures+1, policy.MaxFeatures)}},
		},
		{
			name: "MaxFeatures distinct features are accepted",
			edit: func(d *document) { addFeatures(d, policy.MaxFeatures) },
		},

		// Principals.
		{
			name: "anonymous principal",
			edit: func(d *document) { d.set("tenants[0].principals[0].kind", "anonymous") },
			want: []want{{"tenants[0].principals[0].kind", "anonymous principals are never authorized"}},
		},
		{
			name: "unknown principal kind",
			edit: func(d *document) { d.set("tenants[0].principals[0].kind", "robot") },
			want: []want{{"tenants[0].principals[0].kind", "must be user or service"}},
		},
		{
			name: "tenant without principals is accepted",
			edit: func(d *document) { d.set("tenants[0].principals", []any{}) },
		},

		// Everything at once.
		{
			name: "independent problems are all reported",
			edit: func(d *document) {
				d.set("colour", "blue")
				d.set("node.budget_ceiling.wall_time_ms", 0)
				d.set("tenants[2].id", "acme")
			},
			want: []want{
				{"colour", "unknown key"},
				{"node.budget_ceiling.wall_time_ms", "must be positive"},
				{"tenants[2].id", "duplicates tenants[0]"},
			},
		},
	}
}

// addTrustClasses makes the file configure n trust classes, keeping the
// two the tenants use.
func addTrustClasses(d *document, n int) {
	for i := len(d.get("trust_classes").([]any)); i < n; i++ {
		tc := d.copyOf("trust_classes[0]")
		tc["name"] = fmt.Sprintf("extra-%d", i)
		d.push("trust_classes", tc)
	}
}

// addFeatures makes the cell classes offer n distinct features, keeping
// simd and threads.
func addFeatures(d *document, n int) {
	features := []any{"simd", "threads"}
	for i := len(features); i < n; i++ {
		features = append(features, fmt.Sprintf("feature-%d", i))
	}
	d.set("cell_classes[3].features", features)
}
