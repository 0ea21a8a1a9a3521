package policy

import (
	"math"
	"strings"

	"latent.dev/admission/internal/strictjson"
)

// MaxPriority is the largest priority a policy may configure; it bounds the
// dense priority-to-queue-class table.
const MaxPriority = 65535

// DecodePolicy strictly decodes a policy file and validates it. The error,
// if any, is a [latent.dev/admission/problems.List] listing every problem with its JSON
// path. A structural problem (missing, unknown or mistyped key) hides the
// rule violations reported under the same path, which would only repeat it.
func DecodePolicy(data []byte) (*NodeAdmissionPolicy, error) {
	tree, parseProblems := strictjson.Parse(data)
	if tree == nil {
		return nil, parseProblems
	}
	d := strictjson.NewDecoder(parseProblems)
	p := decodePolicyValue(d, tree)
	structural := d.Problems()
	semantic := strictjson.AsProblems(p.validate(brokenInputsOf(structural)))
	all := append(strictjson.Problems(nil), structural...)
	for _, s := range semantic {
		if !coveredBy(s.Path, structural) {
			all = append(all, s)
		}
	}
	if len(all) > 0 {
		return nil, all
	}
	return p, nil
}

func brokenInputsOf(structural strictjson.Problems) brokenInputs {
	var b brokenInputs
	for _, s := range structural {
		b.maximumPriority = b.maximumPriority || s.Path == "" || s.Path == "node" || s.Path == "node.maximum_priority"
		b.cellClasses = b.cellClasses || s.Path == "" || strings.HasPrefix(s.Path, "cell_classes")
		b.trustClasses = b.trustClasses || s.Path == "" || strings.HasPrefix(s.Path, "trust_classes")
		b.tenants = b.tenants || s.Path == "" || strings.HasPrefix(s.Path, "tenants")
	}
	return b
}

func coveredBy(path string, structural strictjson.Problems) bool {
	for _, s := range structural {
		if s.Path == "" || path == s.Path ||
			(len(path) > len(s.Path) && path[:len(s.Path)] == s.Path &&
				(path[len(s.Path)] == '.' || path[len(s.Path)] == '[')) {
			return true
		}
	}
	return false
}

// decodePolicyValue decodes an already-parsed policy object, recording
// structural problems in d. It does not validate; callers that embed a
// policy in a larger document (scenarios) use it and then call Validate.
func decodePolicyValue(d *strictjson.Decoder, v *strictjson.Value) *NodeAdmissionPolicy {
	p := &NodeAdmissionPolicy{}
	root := d.Object(v)
	decodeNode(d, root.Object("node"), &p.Node)
	for _, it := range root.Array("queue_classes") {
		o := d.Object(it)
		p.QueueClasses = append(p.QueueClasses, QueueClassPolicy{
			Name:        o.String("name"),
			MinPriority: uint32(o.Uint64Max("min_priority", math.MaxUint32)),
			MaxPriority: uint32(o.Uint64Max("max_priority", math.MaxUint32)),
			MaxQueued:   o.Uint64("max_queued"),
		})
		o.Done()
	}
	for _, it := range root.Array("cell_classes") {
		o := d.Object(it)
		p.CellClasses = append(p.CellClasses, CellClassPolicy{
			Class:       o.String("class"),
			MemoryBytes: o.Uint64("memory_bytes"),
			Parallelism: o.Uint64("parallelism"),
			Threading:   o.Strings("threading"),
			Features:    o.Strings("features"),
		})
		o.Done()
	}
	for _, it := range root.Array("trust_classes") {
		o := d.Object(it)
		p.TrustClasses = append(p.TrustClasses, TrustClassPolicy{
			Name:        o.String("name"),
			CellClasses: o.Strings("cell_classes"),
			Limits:      decodeLimits(o.Object("limits")),
		})
		o.Done()
	}
	for _, it := range root.Array("tenants") {
		o := d.Object(it)
		t := TenantPolicy{ID: o.String("id")}
		for _, pv := range o.Array("principals") {
			po := d.Object(pv)
			t.Principals = append(t.Principals, PrincipalPolicy{Kind: po.String("kind"), Subject: po.String("subject")})
			po.Done()
		}
		t.TrustClasses = o.Strings("trust_classes")
		t.CellClasses = o.Strings("cell_classes")
		t.MaximumPriority = uint32(o.Uint64Max("maximum_priority", math.MaxUint32))
		t.MaximumPayloadBytes = o.Uint64("maximum_payload_bytes")
		t.Limits = decodeLimits(o.Object("limits"))
		o.Done()
		p.Tenants = append(p.Tenants, t)
	}
	if fo, ok := root.OptionalObject("fleet"); ok {
		p.Fleet.Tenants = fo.Strings("tenants")
		fo.Done()
	}
	root.Done()
	return p
}

func decodeNode(d *strictjson.Decoder, o *strictjson.Object, n *NodePolicy) {
	pl := o.Object("placement")
	n.Placement = Placement{Architecture: pl.String("architecture"), Region: pl.String("region"), Zone: pl.String("zone")}
	pl.Done()
	n.Backends = o.Strings("backends")
	n.StateModels = o.Strings("state_models")
	bc := o.Object("budget_ceiling")
	n.BudgetCeiling = NodeBudgetCeiling{
		CPUFuel:     bc.Uint64("cpu_fuel"),
		MemoryBytes: bc.Uint64("memory_bytes"),
		WallTime:    bc.Millis("wall_time_ms"),
	}
	bc.Done()
	n.Limits = decodeLimits(o.Object("limits"))
	n.MaximumPayloadBytes = o.Uint64("maximum_payload_bytes")
	n.MaximumPriority = uint32(o.Uint64Max("maximum_priority", math.MaxUint32))
	n.MaximumIdentifierBytes = uint32(o.Uint64Max("maximum_identifier_bytes", math.MaxUint32))
	n.MaximumGeneratedIdentifierBytes = uint32(o.Uint64Max("maximum_generated_identifier_bytes", math.MaxUint32))
	n.MaximumMetadataEntries = uint32(o.Uint64Max("maximum_metadata_entries", math.MaxUint32))
	n.MaximumMetadataBytes = o.Uint64("maximum_metadata_bytes")
	ov := o.Object("overload")
	n.Overload = OverloadPolicy{
		CPUThreshold:          ov.Float("cpu_threshold"),
		MemoryThreshold:       ov.Float("memory_threshold"),
		MaximumObservationAge: ov.Millis("maximum_observation_age_ms"),
	}
	ov.Done()
	dl := o.Object("deadline")
	n.Deadline = DeadlinePolicy{
		EstimatedServiceTime: dl.Millis("estimated_service_time_ms"),
		MinimumExecutionTime: dl.Millis("minimum_execution_time_ms"),
		SafetyMargin:         dl.Millis("safety_margin_ms"),
	}
	dl.Done()
	o.Done()
}

func decodeLimits(o *strictjson.Object) Limits {
	l := Limits{
		MaxLiveActivations:     o.Uint64("max_live_activations"),
		MaxQueuedReservations:  o.Uint64("max_queued_reservations"),
		MaxReservedCPUFuel:     o.Uint64("max_reserved_cpu_fuel"),
		MaxReservedMemoryBytes: o.Uint64("max_reserved_memory_bytes"),
	}
	o.Done()
	return l
}
