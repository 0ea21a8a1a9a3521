package core_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/internal/model/gen"
	"latent.dev/admission/policy"
)

// FuzzAdmit decodes arbitrary bytes into a sequence of admissions (with
// identifiers that may be invalid UTF-8, hold white space or be too
// long; any principal, revision tuple, budget, deadline, payload,
// priority and metadata), permit operations, load publishes and clock
// moves, and runs them against a controller and the reference model.
// Nothing may panic; every error must be one of core.AllErrors() (the
// very pointer); core and the model must answer alike; the ledger's
// invariants must hold after every step; and once every permit is
// released, every scope must be back to zero.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x01\x04\x01"))
	f.Add([]byte("\x00\x09a b\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x07\x06\x08\x09\x0a"))
	var fill, cycle []byte
	for k := byte(0); k < 6; k++ {
		fill = append(fill, admitBytes(k)...)
		cycle = append(cycle, admitBytes(k)...)
		cycle = append(cycle, 4, 0, 0, 1, 5, 1, 6, 0) // start a permit, release one, release an execution
	}
	f.Add(fill)
	f.Add(cycle)
	f.Fuzz(func(t *testing.T, data []byte) {
		fz := newFuzzRun(t)
		in := &fuzzInput{data: data}
		for step := 0; step < 64 && in.more(); step++ {
			fz.step(t, in)
			fz.checkInvariants(t)
		}
		fz.finish(t)
	})
}

// admitBytes encodes an ordinary admission (acme's route r, user alice,
// 1 fuel, 1 memory) of activation ID a<k+1>.
func admitBytes(k byte) []byte {
	b := make([]byte, 20) // the operation, then what request reads
	b[5] = k
	return b
}

// fuzzInput hands out the fuzzer's bytes; past the end it reads zeros,
// so every input decodes to something.
type fuzzInput struct {
	data []byte
}

func (in *fuzzInput) more() bool { return len(in.data) > 0 }

func (in *fuzzInput) byte() byte {
	if len(in.data) == 0 {
		return 0
	}
	b := in.data[0]
	in.data = in.data[1:]
	return b
}

func (in *fuzzInput) uint64() uint64 {
	var buf [8]byte
	n := copy(buf[:], in.data)
	in.data = in.data[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// choose returns one of options, by the next byte.
func choose[E any](in *fuzzInput, options ...E) E { return options[int(in.byte())%len(options)] }

// raw is up to 24 bytes taken as they are: any UTF-8 or none.
func (in *fuzzInput) raw() string {
	n := int(in.byte()) % 25
	n = min(n, len(in.data))
	s := string(in.data[:n])
	in.data = in.data[n:]
	return s
}

// name is usually one of known (valid, configured names), else raw bytes.
func (in *fuzzInput) name(known ...string) string {
	if b := in.byte(); int(b) < 200 {
		return known[int(b)%len(known)]
	}
	return in.raw()
}

// amount is a small positive count, an edge value (zero included) or any
// 64-bit number.
func (in *fuzzInput) amount() uint64 {
	switch b := in.byte(); {
	case b < 200:
		return uint64(b%8) + 1
	case b < 240:
		return choose[uint64](in, 0, 1, 1<<20, math.MaxUint32, math.MaxUint64-1, math.MaxUint64)
	default:
		return in.uint64()
	}
}

func (in *fuzzInput) duration() time.Duration {
	switch b := in.byte(); {
	case b < 200:
		return time.Duration(b%50) * 10 * time.Millisecond
	case b < 240:
		return choose(in, 0, time.Nanosecond, -time.Nanosecond, time.Hour, math.MaxInt64, math.MinInt64)
	default:
		return time.Duration(in.uint64())
	}
}

func (in *fuzzInput) metadata() map[string]string {
	n := int(in.byte()) % 4
	if n == 0 {
		return nil
	}
	m := map[string]string{}
	for range n {
		m[in.raw()] = in.raw()
	}
	return m
}

// fuzzPolicy is a small node whose limits are reached within a few steps:
// two tenants (acme with two trust classes, globex with one), three cell
// classes with different threading and features, two queue classes.
func fuzzPolicy() *policy.NodeAdmissionPolicy {
	limits := func(live, queued, fuel, memory uint64) policy.Limits {
		return policy.Limits{MaxLiveActivations: live, MaxQueuedReservations: queued, MaxReservedCPUFuel: fuel, MaxReservedMemoryBytes: memory}
	}
	return &policy.NodeAdmissionPolicy{
		Node: policy.NodePolicy{
			Placement:           policy.Placement{Architecture: "x86_64", Region: "eu", Zone: "a"},
			Backends:            []string{"wasm"},
			StateModels:         []string{"stateless", "stateful"},
			BudgetCeiling:       policy.NodeBudgetCeiling{CPUFuel: 6, MemoryBytes: 8, WallTime: 2 * time.Second},
			Limits:              limits(4, 3, 14, 20),
			MaximumPayloadBytes: 4, MaximumPriority: 3, MaximumIdentifierBytes: 12, MaximumGeneratedIdentifierBytes: 84,
			MaximumMetadataEntries: 3, MaximumMetadataBytes: 24,
			Overload: policy.OverloadPolicy{CPUThreshold: 0.9, MemoryThreshold: 0.9, MaximumObservationAge: time.Second},
			Deadline: policy.DeadlinePolicy{EstimatedServiceTime: 50 * time.Millisecond, MinimumExecutionTime: 5 * time.Millisecond, SafetyMargin: 5 * time.Millisecond},
		},
		QueueClasses: []policy.QueueClassPolicy{{Name: "batch", MinPriority: 0, MaxPriority: 1, MaxQueued: 2}, {Name: "online", MinPriority: 2, MaxPriority: 5, MaxQueued: 2}},
		CellClasses: []policy.CellClassPolicy{
			{Class: "tiny", MemoryBytes: 2, Parallelism: 1, Threading: []string{"single"}},
			{Class: "small", MemoryBytes: 4, Parallelism: 2, Threading: []string{"single"}, Features: []string{"simd"}},
			{Class: "extra-large", MemoryBytes: 8, Parallelism: 1, Threading: []string{"single", "multi"}, Features: []string{"simd", "threads"}},
		},
		TrustClasses: []policy.TrustClassPolicy{
			{Name: "standard", CellClasses: []string{"tiny", "small"}, Limits: limits(3, 3, 12, 16)},
			{Name: "privileged", CellClasses: []string{"tiny", "small", "extra-large"}, Limits: limits(2, 1, 8, 10)},
		},
		Tenants: []policy.TenantPolicy{
			{ID: "acme", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "alice"}, {Kind: "service", Subject: "billing"}},
				TrustClasses: []string{"standard", "privileged"}, CellClasses: []string{"tiny", "small", "extra-large"},
				MaximumPriority: 3, MaximumPayloadBytes: 3, Limits: limits(3, 2, 10, 12)},
			{ID: "globex", Principals: []policy.PrincipalPolicy{{Kind: "user", Subject: "bob"}},
				TrustClasses: []string{"standard"}, CellClasses: []string{"tiny", "small"},
				MaximumPriority: 1, MaximumPayloadBytes: 4, Limits: limits(2, 2, 6, 6)},
		},
	}
}

// fuzzSources are two generations; the second redeploys acme's "r" route
// with another policy and drops globex.
func fuzzSources() ([]*gen.Source, []policy.ResolvedRevision) {
	rev := func(tenant, route string, gen uint64) policy.ResolvedRevision {
		return policy.ResolvedRevision{RevisionIdentity: policy.RevisionIdentity{Tenant: tenant, Service: "svc", Route: route, Contract: "c", Function: "f",
			Revision: "rev-" + route, Release: "rel-" + route, Generation: gen}}
	}
	standard := &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
		CapsuleCeiling: policy.Ceiling{WallTime: policy.Some(time.Second)}}
	privileged := &policy.RevisionPolicy{TrustClass: "privileged", Backend: "wasm", Threading: policy.MultiThreaded, StateModel: "stateful",
		Features: []string{"threads"}, CallDepthLimit: 3, DeploymentCeiling: policy.Ceiling{CPUFuel: policy.Some[uint64](4), MemoryBytes: policy.Some[uint64](6)}}
	simd := &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
		Features: []string{"simd"}, Placement: policy.PlacementRestriction{Regions: []string{"eu"}}}
	elsewhere := &policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded, StateModel: "stateless",
		Placement: policy.PlacementRestriction{Zones: []string{"b"}}}
	first := &gen.Source{Entries: []gen.Entry{
		{Revision: rev("acme", "r", 1), Policy: standard}, {Revision: rev("acme", "p", 1), Policy: privileged}, {Revision: rev("acme", "s", 1), Policy: simd},
		{Revision: rev("globex", "r", 1), Policy: standard}, {Revision: rev("globex", "s", 1), Policy: simd}, {Revision: rev("globex", "z", 1), Policy: elsewhere},
	}}
	second := &gen.Source{Entries: []gen.Entry{{Revision: rev("acme", "r", 2), Policy: privileged}, {Revision: rev("acme", "s", 2), Policy: standard}}}
	var all []policy.ResolvedRevision
	for _, s := range []*gen.Source{first, second} {
		for _, e := range s.Entries {
			all = append(all, e.Revision)
		}
	}
	return []*gen.Source{first, second}, all
}

type fuzzRun struct {
	policy    *policy.NodeAdmissionPolicy
	sources   []*gen.Source
	revisions []policy.ResolvedRevision
	now       time.Time
	clock     *gen.Clock
	known     map[core.Error]bool

	provider  *core.LocalQuotaProvider
	coreLoad  *core.NodeLoadState
	coreCtl   *core.AdmissionController
	model     *model.Model
	modelLoad *model.LoadState
	modelCtl  *model.Controller

	sequence   uint64
	permits    []permitPair
	executions []executionPair
}

func newFuzzRun(t *testing.T) *fuzzRun {
	p := fuzzPolicy()
	sources, revisions := fuzzSources()
	fz := &fuzzRun{policy: p, sources: sources, revisions: revisions, now: diffEpoch, clock: gen.NewClock(diffEpoch), known: diffKnownErrors}
	var err error
	if fz.provider, err = core.NewLocalQuotaProvider(p); err != nil {
		t.Fatal(err)
	}
	if fz.model, err = model.New(p); err != nil {
		t.Fatal(err)
	}
	maxAge := p.Node.Overload.MaximumObservationAge
	fz.coreLoad, fz.modelLoad = core.NewNodeLoadState(maxAge, fz.clock), model.NewLoadState(maxAge, fz.clock)
	fz.coreCtl = fz.provider.Controller(core.ControllerConfig{Source: sources[0], Load: fz.coreLoad, Clock: fz.clock})
	fz.modelCtl = fz.model.Controller(sources[0], fz.modelLoad, fz.clock)
	fz.publish(t, core.LoadSample{Sequence: 1, ObservedAt: diffEpoch})
	return fz
}

// agree fails unless core and the model gave the same answer and core's
// error, if any, is one of its preallocated values.
func (fz *fuzzRun) agree(t *testing.T, op string, cerr, merr error) {
	t.Helper()
	if cerr != nil {
		if ce, ok := cerr.(core.Error); !ok || !fz.known[ce] {
			t.Fatalf("%s: %T %v is not one of core.AllErrors()", op, cerr, cerr)
		}
	}
	if (cerr == nil) != (merr == nil) || (cerr != nil && cerr.Error() != merr.Error()) {
		t.Fatalf("%s: core answered %v, model answered %v", op, cerr, merr)
	}
}

func (fz *fuzzRun) publish(t *testing.T, s core.LoadSample) {
	err := fz.coreLoad.Publish(s)
	fz.agree(t, "Publish", err, fz.modelLoad.Publish(s))
	if err == nil {
		fz.sequence = s.Sequence
	}
}

func (fz *fuzzRun) request(in *fuzzInput) *core.AdmissionRequest {
	rev := choose(in, fz.revisions...)
	// own is what the resolver handed out with the identity.
	own := fz.handleOf(rev.RevisionIdentity)
	if in.byte() >= 200 { // one field of the tuple replaced
		field := choose(in, &rev.Tenant, &rev.Service, &rev.Route, &rev.Contract, &rev.Function, &rev.Revision, &rev.Release)
		*field = in.raw()
	}
	if in.byte() >= 240 {
		rev.Generation = in.uint64()
	}
	rev.Attributes = in.metadata()
	req := &core.AdmissionRequest{
		ActivationID: in.name("a1", "a2", "a3", "a4", "a5", "a6"),
		Principal: core.Principal{
			Kind:    choose(in, policy.UserPrincipal, policy.ServicePrincipal, policy.UserPrincipal, policy.AnonymousPrincipal, 0, 9),
			Subject: in.name("alice", "billing", "bob"),
			Tenant:  rev.Tenant,
			Service: in.name("", "svc-api"),
			Claims:  in.metadata(),
		},
		Revision: rev,
		RequestedBudget: policy.Budget{
			CPUFuel:     in.amount(),
			MemoryBytes: in.amount(),
		},
		PayloadBytes: in.amount() - 1,
		Priority:     uint32(in.amount() - 1),
		Attributes:   in.metadata(),
	}
	if in.byte() >= 240 {
		req.Principal.Tenant = in.name("acme", "globex", "hooli")
	}
	if b := in.byte(); b >= 128 {
		req.RequestedBudget.WallTime = policy.Some(in.duration())
	}
	if b := in.byte(); b >= 240 {
		switch in.byte() % 3 {
		case 0:
			req.RequestedBudget.NetworkEgressBytes = in.amount()
		case 1:
			req.RequestedBudget.StorageBytes = in.amount()
		default:
			req.RequestedBudget.OutboundCalls = in.amount()
		}
	}
	if b := in.byte(); b >= 160 {
		ms := fz.now.UnixMilli() + int64(in.duration()/time.Millisecond)
		if b >= 250 {
			ms = int64(in.uint64())
		}
		req.Deadline = policy.Some(ms)
	}
	// The handle: the one resolved with the identity (which the edits
	// above may have made stale), none, or any entry's of either source.
	switch b := in.byte(); {
	case b < 128:
		req.Handle = own
	case b < 192:
	default:
		src := choose(in, fz.sources...)
		req.Handle = src.Handle(int(in.byte()) % len(src.Entries))
	}
	return req
}

// handleOf is the handle of the source entry whose identity is id.
func (fz *fuzzRun) handleOf(id policy.RevisionIdentity) core.RevisionHandle {
	for _, src := range fz.sources {
		for i := range src.Entries {
			if src.Entries[i].Revision.RevisionIdentity == id {
				return src.Handle(i)
			}
		}
	}
	return nil
}

func (fz *fuzzRun) step(t *testing.T, in *fuzzInput) {
	switch in.byte() % 10 {
	case 0, 1, 2:
		req := fz.request(in)
		cp, cerr := fz.coreCtl.AdmitAt(req, fz.now)
		mp, merr := fz.modelCtl.AdmitAt(req, fz.now)
		fz.admitted(t, cp, cerr, mp, merr)
	case 3:
		req := fz.request(in)
		cp, cerr := fz.coreCtl.Admit(req)
		mp, merr := fz.modelCtl.Admit(req)
		fz.admitted(t, cp, cerr, mp, merr)
	case 4:
		if len(fz.permits) == 0 {
			return
		}
		pp := choose(in, fz.permits...)
		at := fz.now.Add(in.duration())
		switch in.byte() % 3 {
		case 0:
			fz.agree(t, "EnsureSchedulableAt", pp.core.EnsureSchedulableAt(at), pp.model.EnsureSchedulableAt(at))
		case 1:
			ce, cerr := pp.core.StartExecutionAt(at)
			me, merr := pp.model.StartExecutionAt(at)
			fz.started(t, ce, cerr, me, merr)
		default:
			ce, cerr := pp.core.StartExecution()
			me, merr := pp.model.StartExecution()
			fz.started(t, ce, cerr, me, merr)
		}
	case 5:
		if len(fz.permits) == 0 {
			return
		}
		pp := choose(in, fz.permits...)
		if c, m := pp.core.Release(), pp.model.Release(); c != m {
			t.Fatalf("Release: core %v, model %v", c, m)
		}
	case 6:
		if len(fz.executions) == 0 {
			return
		}
		ep := choose(in, fz.executions...)
		if c, m := ep.core.Release(), ep.model.Release(); c != m {
			t.Fatalf("ExecutionPermit.Release: core %v, model %v", c, m)
		}
	case 7:
		fz.now = fz.now.Add(in.duration())
		fz.clock.Set(fz.now)
	case 8:
		s := core.LoadSample{
			Sequence:       fz.sequence + uint64(in.byte()%3),
			ObservedAt:     fz.now.Add(-in.duration()),
			CPUPressure:    choose(in, 0, 0.5, 0.9, 1, math.NaN(), -1, math.Inf(1), math.Float64frombits(in.uint64())),
			MemoryPressure: choose(in, 0, 0.5, 0.9, 1, math.NaN(), -1, math.Inf(1), math.Float64frombits(in.uint64())),
		}
		s.QueueDelay[in.byte()%policy.NumCellClasses] = in.duration()
		fz.publish(t, s)
	default:
		var src core.RevisionPolicySource
		if i := int(in.byte()) % (len(fz.sources) + 1); i < len(fz.sources) {
			src = fz.sources[i]
		}
		fz.coreCtl = fz.coreCtl.WithPolicySource(src)
		fz.modelCtl = fz.modelCtl.WithPolicySource(src)
	}
}

func (fz *fuzzRun) admitted(t *testing.T, cp *core.AdmissionPermit, cerr error, mp *model.Permit, merr error) {
	fz.agree(t, "Admit", cerr, merr)
	if cerr != nil {
		return
	}
	if cp.Grant().Budget != mp.Grant().Budget || !cp.Grant().Deadline.Equal(mp.Grant().Deadline) {
		t.Fatalf("grant: core %+v %v, model %+v %v", cp.Grant().Budget, cp.Grant().Deadline, mp.Grant().Budget, mp.Grant().Deadline)
	}
	co, mo := cp.Grant().Obligations, mp.Grant().Obligations
	if co.CellClass != mo.CellClass || co.QueueClass != mo.QueueClass || co.TrustClass != mo.TrustClass || !slices.Equal(co.Features.Names(), mo.Features.Names()) {
		t.Fatalf("obligations: core %+v, model %+v", co, mo)
	}
	fz.permits = append(fz.permits, permitPair{core: cp, model: mp})
}

func (fz *fuzzRun) started(t *testing.T, ce *core.ExecutionPermit, cerr error, me *model.Permit, merr error) {
	fz.agree(t, "StartExecution", cerr, merr)
	if cerr == nil {
		fz.executions = append(fz.executions, executionPair{core: ce, model: me})
	}
}

// checkInvariants holds the ledger to what no sequence of calls may
// break: every scope within its limits, queued never above live, every
// scope's counters summing to the node's, the live table as large as the
// node's live count, and the model's snapshots equal to core's.
func (fz *fuzzRun) checkInvariants(t *testing.T) {
	pr := fz.provider
	node := pr.NodeSnapshot()
	within := func(name string, s core.QuotaSnapshot) {
		l := s.Limits
		if s.Live > l.MaxLiveActivations || s.Queued > l.MaxQueuedReservations || s.Queued > s.Live ||
			s.CPUFuel > l.MaxReservedCPUFuel || s.MemoryBytes > l.MaxReservedMemoryBytes {
			t.Fatalf("%s breaks its limits: %+v", name, s)
		}
	}
	within("node", node)
	if m := fz.model.NodeSnapshot(); m != node {
		t.Fatalf("node: core %+v, model %+v", node, m)
	}
	var tenants, trusts core.QuotaSnapshot
	for _, tp := range fz.policy.Tenants {
		s, _ := pr.TenantSnapshot(tp.ID)
		within("tenant "+tp.ID, s)
		if m, _ := fz.model.TenantSnapshot(tp.ID); m != s {
			t.Fatalf("tenant %s: core %+v, model %+v", tp.ID, s, m)
		}
		tenants.Live, tenants.Queued, tenants.CPUFuel, tenants.MemoryBytes = tenants.Live+s.Live, tenants.Queued+s.Queued, tenants.CPUFuel+s.CPUFuel, tenants.MemoryBytes+s.MemoryBytes
	}
	for _, tc := range fz.policy.TrustClasses {
		s, _ := pr.TrustClassSnapshot(tc.Name)
		within("trust class "+tc.Name, s)
		if m, _ := fz.model.TrustClassSnapshot(tc.Name); m != s {
			t.Fatalf("trust class %s: core %+v, model %+v", tc.Name, s, m)
		}
		trusts.Live, trusts.Queued, trusts.CPUFuel, trusts.MemoryBytes = trusts.Live+s.Live, trusts.Queued+s.Queued, trusts.CPUFuel+s.CPUFuel, trusts.MemoryBytes+s.MemoryBytes
	}
	sums := core.QuotaSnapshot{Live: node.Live, Queued: node.Queued, CPUFuel: node.CPUFuel, MemoryBytes: node.MemoryBytes}
	if tenants != sums || trusts != sums {
		t.Fatalf("scopes do not add up to the node: tenants %+v, trust classes %+v, node %+v", tenants, trusts, node)
	}
	var queued, live uint64
	for _, q := range fz.policy.QueueClasses {
		n, max, _ := pr.QueueClassSnapshot(q.Name)
		if mn, _, _ := fz.model.QueueClassSnapshot(q.Name); n > max || mn != n {
			t.Fatalf("queue class %s: core %d of %d, model %d", q.Name, n, max, mn)
		}
		queued += n
	}
	for c := policy.CellClass(0); c < policy.NumCellClasses; c++ {
		n, _ := pr.CellClassSnapshot(c)
		if mn, _ := fz.model.CellClassSnapshot(c); mn != n {
			t.Fatalf("cell class %v: core %d, model %d", c, n, mn)
		}
		live += n
	}
	if queued != node.Queued || live != node.Live || uint64(pr.LiveReservations()) != node.Live {
		t.Fatalf("queue classes hold %d, cell classes %d, live table %d; node %+v", queued, live, pr.LiveReservations(), node)
	}
}

// finish releases every permit, in both implementations, and checks that
// every scope is back to zero.
func (fz *fuzzRun) finish(t *testing.T) {
	releaseBoth(t, fz.permits, fz.executions)
	fz.checkInvariants(t)
	if s := fz.provider.NodeSnapshot(); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
		t.Fatalf("the node is not back to zero: %+v", s)
	}
	for _, tp := range fz.policy.Tenants {
		if s, _ := fz.provider.TenantSnapshot(tp.ID); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			t.Fatalf("tenant %s is not back to zero: %+v", tp.ID, s)
		}
	}
	for _, tc := range fz.policy.TrustClasses {
		if s, _ := fz.provider.TrustClassSnapshot(tc.Name); s.Live != 0 || s.Queued != 0 || s.CPUFuel != 0 || s.MemoryBytes != 0 {
			t.Fatalf("trust class %s is not back to zero: %+v", tc.Name, s)
		}
	}
}
