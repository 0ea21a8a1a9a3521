package scenario

import (
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// Scenario is a decoded scenario file.
type Scenario struct {
	Name    string
	Epoch   time.Time
	Policy  *policy.NodeAdmissionPolicy
	Catalog catalog.File
	Steps   []Step
}

// Step is one decoded step. Only the fields of its op are set.
type Step struct {
	Op     string
	At     time.Duration // after the epoch
	Expect *strictjson.Value

	Sample core.LoadSampleMillis // load; ObservedAtUnixMillis is relative to the epoch here

	Permit     string // admit, schedulable, start, release
	Request    Request
	Pin        string // admit (optional), pin
	Tamper     Tamper
	Scope      string // snapshot
	Name       string // snapshot
	Deployment catalog.Deployment
	Tenant     string // delete, fleet-slice, fleet-withdraw
	Service    string // delete

	Slice           int64 // fleet-slice
	ValidUntilMilli int64 // fleet-slice: ms after the epoch
}

// Request is an admit step's request before resolution.
type Request struct {
	Request    core.AdmissionRequest // Revision is filled by resolution
	Target     catalog.Target
	RoutingKey string
}

// Tamper replaces fields of the resolved revision before admission.
type Tamper struct {
	Tenant, Service, Route, Contract, Function, Revision, Release *string
	Generation                                                    *uint64
	Attributes                                                    map[string]string
	HasAttributes                                                 bool
}

// Ops lists the step operations.
var Ops = []string{"load", "load-clear", "admit", "schedulable", "start", "release", "snapshot", "deploy", "delete", "pin", "restart",
	"fleet-slice", "fleet-withdraw"}

// Decode strictly decodes a scenario file. Every problem is reported at
// once with its JSON path, as a strictjson.Problems error.
func Decode(data []byte) (*Scenario, error) {
	tree, problems := strictjson.Parse(data)
	if tree == nil {
		return nil, problems
	}
	d := strictjson.NewDecoder(problems)
	s := &Scenario{}
	root := d.Object(tree)
	s.Name = root.String("name")
	s.Epoch = time.UnixMilli(root.Int64("epoch_unix_ms"))
	// The policy, the catalog and each deployed deployment are decoded by
	// their packages' own public decoders, their problems placed under
	// their paths in the scenario.
	if v, ok := root.Get("policy"); ok {
		var err error
		if s.Policy, err = policy.DecodePolicy(strictjson.Encode(v)); err != nil {
			d.Reported(v, err)
		}
	}
	if v, ok := root.Get("catalog"); ok {
		var err error
		if s.Catalog, err = catalog.DecodeCatalogFile(strictjson.Encode(v), false); err != nil {
			d.Reported(v, err)
		}
	}
	var last time.Duration
	for _, sv := range root.Array("steps") {
		st := decodeStep(d, sv, last)
		last = st.At
		s.Steps = append(s.Steps, st)
	}
	root.Done()
	if err := d.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

func decodeStep(d *strictjson.Decoder, v *strictjson.Value, last time.Duration) Step {
	o := d.Object(v)
	st := Step{Op: o.String("op"), At: last}
	if at, ok := o.Optional("at_ms"); ok {
		if ms, ok := d.Millis(at); ok {
			if ms < last {
				d.ProblemAt(at, "goes backwards (the previous step is at %d ms)", last.Milliseconds())
			} else {
				st.At = ms
			}
		}
	}
	if e, ok := o.Optional("expect"); ok {
		if e.Kind != strictjson.ObjectKind {
			d.ProblemAt(e, "expected an object, got %s", e.Kind)
		} else {
			st.Expect = e
		}
	}
	switch st.Op {
	case "load":
		decodeSample(d, o.Object("sample"), &st)
	case "load-clear", "restart":
	case "admit":
		st.Permit = o.String("permit")
		st.Request = decodeRequest(d, o.Object("request"))
		if pv, ok := o.Optional("pin"); ok {
			st.Pin, _ = d.String(pv)
		}
		if t, ok := o.OptionalObject("tamper"); ok {
			st.Tamper = decodeTamper(d, t)
		}
	case "schedulable", "start", "release":
		st.Permit = o.String("permit")
	case "snapshot":
		st.Scope = o.String("scope")
		switch st.Scope {
		case "node":
		case "tenant", "trust-class", "queue-class", "cell-class", "fleet":
			st.Name = o.String("name")
		default:
			d.Problemf(strictjson.JoinKey(o.Path(), "scope"), "must be one of node, tenant, trust-class, queue-class, cell-class, fleet")
		}
	case "deploy":
		if dv, ok := o.Get("deployment"); ok {
			var err error
			if st.Deployment, err = catalog.ValidateDeployment(strictjson.Encode(dv), nil); err != nil {
				d.Reported(dv, err)
			}
		}
	case "delete":
		st.Tenant = o.String("tenant")
		st.Service = o.String("service")
	case "pin":
		st.Pin = o.String("name")
	case "fleet-slice":
		// A negative slice decodes: publishing it is what gets refused,
		// as it would be on a node.
		st.Tenant = o.String("tenant")
		st.Slice = o.Int64("slice")
		st.ValidUntilMilli = o.Int64("valid_until_ms")
	case "fleet-withdraw":
		st.Tenant = o.String("tenant")
	case "":
		// reported as missing or mistyped already
	default:
		d.Problemf(strictjson.JoinKey(o.Path(), "op"), "unknown op %q (one of %v)", st.Op, Ops)
	}
	o.Done()
	return st
}

func decodeSample(d *strictjson.Decoder, o *strictjson.Object, st *Step) {
	st.Sample.Sequence = o.Uint64("seq")
	st.Sample.ObservedAtUnixMillis = o.Int64("observed_at_ms")
	st.Sample.CPUPressure = o.Float("cpu")
	st.Sample.MemoryPressure = o.Float("memory")
	if qv, ok := o.Optional("queue_delay_ms"); ok {
		if qv.Kind != strictjson.ObjectKind {
			d.ProblemAt(qv, "expected an object, got %s", qv.Kind)
		}
		for _, m := range qv.Members {
			class, ok := policy.ParseCellClass(m.Key)
			if !ok {
				d.ProblemAt(m.Value, "is not a cell class (tiny, small, standard, large, extra-large)")
				continue
			}
			// Negative or oversized delays decode: publishing them is what
			// gets rejected, as it would be on a node.
			if ms, ok := d.Int64(m.Value); ok {
				st.Sample.QueueDelayMillis[class] = ms
			}
		}
	}
	o.Done()
}

func decodeRequest(d *strictjson.Decoder, o *strictjson.Object) Request {
	var r Request
	req := &r.Request
	req.ActivationID = o.String("activation_id")
	p := o.Object("principal")
	kindPath := strictjson.JoinKey(p.Path(), "kind")
	if kindName := p.String("kind"); kindName != "" || p.Has("kind") {
		kind, ok := policy.ParsePrincipalKind(kindName)
		if !ok {
			d.Problemf(kindPath, "must be user, service or anonymous")
		}
		req.Principal.Kind = kind
	}
	req.Principal.Subject = p.String("subject")
	req.Principal.Tenant = p.String("tenant")
	if sv, ok := p.Optional("service"); ok {
		req.Principal.Service, _ = d.String(sv)
	}
	if cv, ok := p.Optional("claims"); ok {
		req.Principal.Claims, _ = d.StringMap(cv)
	}
	p.Done()
	t := o.Object("target")
	r.Target = catalog.Target{Tenant: t.String("tenant"), Service: t.String("service"), Route: t.String("route")}
	t.Done()
	r.RoutingKey = o.String("routing_key")
	b := o.Object("budget")
	req.RequestedBudget.CPUFuel = b.Uint64("cpu_fuel")
	req.RequestedBudget.MemoryBytes = b.Uint64("memory_bytes")
	if w, ok := b.OptionalMillis("wall_time_ms"); ok {
		req.RequestedBudget.WallTime = policy.Some(w)
	}
	req.RequestedBudget.NetworkEgressBytes, _ = b.OptionalUint64("network_egress_bytes")
	req.RequestedBudget.StorageBytes, _ = b.OptionalUint64("storage_bytes")
	req.RequestedBudget.OutboundCalls, _ = b.OptionalUint64("outbound_calls")
	b.Done()
	if dl, ok := o.OptionalInt64("deadline_unix_ms"); ok {
		req.Deadline = policy.Some(dl)
	}
	req.PayloadBytes = o.Uint64("payload_bytes")
	req.Priority = uint32(o.Uint64Max("priority", 1<<32-1))
	if av, ok := o.Optional("attributes"); ok {
		req.Attributes, _ = d.StringMap(av)
	}
	o.Done()
	return r
}

func decodeTamper(d *strictjson.Decoder, o *strictjson.Object) Tamper {
	var t Tamper
	str := func(key string) *string {
		if v, ok := o.Optional(key); ok {
			if s, ok := d.String(v); ok {
				return &s
			}
		}
		return nil
	}
	t.Tenant, t.Service, t.Route = str("tenant"), str("service"), str("route")
	t.Contract, t.Function = str("contract"), str("function")
	t.Revision, t.Release = str("revision"), str("release")
	if g, ok := o.OptionalUint64("generation"); ok {
		t.Generation = &g
	}
	if av, ok := o.Optional("attributes"); ok {
		t.Attributes, _ = d.StringMap(av)
		t.HasAttributes = true
	}
	o.Done()
	return t
}

func (t *Tamper) apply(r *policy.ResolvedRevision) {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&r.Tenant, t.Tenant)
	set(&r.Service, t.Service)
	set(&r.Route, t.Route)
	set(&r.Contract, t.Contract)
	set(&r.Function, t.Function)
	set(&r.Revision, t.Revision)
	set(&r.Release, t.Release)
	if t.Generation != nil {
		r.Generation = *t.Generation
	}
	if t.HasAttributes {
		r.Attributes = t.Attributes
	}
}
