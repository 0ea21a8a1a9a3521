package core_test

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/internal/model/gen"
	"latent.dev/admission/policy"
)

// This file holds core to internal/model, the reference implementation:
// random policies, random revision sources and random sequences of
// admissions (valid and every kind of invalid), permit operations, load
// publishes and clock advances run against both, and after every step
// both give the same answer and the same snapshot of every scope.

// diffEpoch is the virtual time every sequence starts at.
var diffEpoch = time.UnixMilli(1767225600000)

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
	sources   []*gen.Source
	revisions []policy.ResolvedRevision
	clock     *gen.Clock
	now       time.Time
	source    *gen.Source // the controllers' current view; nil when none

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
	outcomes   map[string]int        // answer -> count, for the coverage report
	admitted   int64                 // what core's operator counters must say
	rejected   map[core.Reason]int64 // likewise, per reason
}

var diffKnownErrors = func() map[core.Error]bool {
	m := map[core.Error]bool{}
	for _, e := range core.AllErrors() {
		m[e] = true
	}
	return m
}()

func newDiffMachine(t *rapid.T, outcomes map[string]int) *diffMachine {
	g := gen.Generator{T: t, Friendly: gen.Chance(t, 2, 3, "friendly")}
	p := g.Policy()
	if gen.Chance(t, 1, 2, "fleet") {
		// Some tenants are fleet-limited: their slices are published
		// below and by the PublishFleetSlice step.
		for _, tp := range p.Tenants {
			if gen.Chance(t, 1, 2, "fleet.tenant") {
				p.Fleet.Tenants = append(p.Fleet.Tenants, tp.ID)
			}
		}
	}
	sources, revisions := g.Sources(p)
	m := &diffMachine{policy: p, sources: sources, revisions: revisions, now: diffEpoch,
		clock: gen.NewClock(diffEpoch), outcomes: outcomes, rejected: map[core.Reason]int64{}}
	var err error
	if m.provider, err = core.NewLocalQuotaProvider(p); err != nil {
		t.Fatalf("core refused a valid policy: %v", err)
	}
	if m.model, err = model.New(p); err != nil {
		t.Fatalf("model refused a valid policy: %v", err)
	}
	maxAge := p.Node.Overload.MaximumObservationAge
	m.coreLoad, m.modelLoad = core.NewNodeLoadState(maxAge, m.clock), model.NewLoadState(maxAge, m.clock)
	m.source = sources[0]
	m.coreCtl = m.provider.Controller(core.ControllerConfig{Source: sources[0], Load: m.coreLoad, Clock: m.clock})
	m.modelCtl = m.model.Controller(sources[0], m.modelLoad, m.clock)
	for _, name := range p.Fleet.Tenants {
		if gen.Chance(t, 3, 4, "fleet.initial_slice") {
			slice := int64(gen.Int(t, 0, 3, "fleet.initial_slice.size"))
			until := diffEpoch.Add(gen.Pick(t, []time.Duration{time.Second, time.Minute}, "fleet.initial_slice.until"))
			m.publishSliceBoth(t, name, slice, until)
		}
	}
	if gen.Chance(t, 7, 8, "initial_sample") {
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
		{"Admit", 1, m.admitNow},
		{"EnsureSchedulableAt", 1, m.ensureSchedulable},
		{"StartExecutionAt", 2, m.startAt},
		{"StartExecution", 1, m.startNow},
		{"Release", 2, m.release},
		{"ExecutionRelease", 2, m.releaseExecution},
		{"Publish", 1, m.publish},
		{"Clear", 1, m.clearLoad},
		{"Advance", 3, m.advance},
		{"WithPolicySource", 1, m.swapSource},
		{"PublishFleetSlice", 1, m.publishSlice},
	}
	actions := map[string]func(*rapid.T){"": m.check}
	for _, w := range weights {
		for i := 0; i < w.weight; i++ {
			actions[fmt.Sprintf("%s#%d", w.name, i)] = w.action
		}
	}
	return actions
}

func (m *diffMachine) admitAt(t *rapid.T) {
	req := gen.Request(t, m.policy, m.revisions, m.source, m.now)
	now := m.now
	if gen.Chance(t, 1, 4, "admit.sub_ms") {
		now = now.Add(time.Duration(gen.Int(t, 1, 999_999, "admit.ns")))
	}
	cp, cerr := m.coreCtl.AdmitAt(req, now)
	mp, merr := m.modelCtl.AdmitAt(req, now)
	m.compareAdmission(t, "AdmitAt", cp, cerr, mp, merr)
}

// admitNow admits on the live path, sometimes with time passing during
// the call, so that the deadline and the load sample are judged again, at
// a later reading, under the mutex.
//
// Core's lock-free pre-check may answer capacity-exhausted at the first
// reading, without the second reading a trip through the mutex would
// take; the model always takes the second. Where time passed and the
// model's answer is one that only the later reading gives (the deadline
// passed, the sample went stale), core's pre-check answer is accepted if
// it is exactly the model's answer at the first reading.
func (m *diffMachine) admitNow(t *rapid.T) {
	req := gen.Request(t, m.policy, m.revisions, m.source, m.now)
	first, later := m.now, m.now
	if gen.Chance(t, 1, 2, "now.elapses") {
		later = m.now.Add(gen.Pick(t, []time.Duration{time.Nanosecond, 10 * time.Millisecond, 200 * time.Millisecond,
			time.Second, 6 * time.Second}, "now.elapsed"))
	}
	m.clock.Arm(first, later)
	cp, cerr := m.coreCtl.Admit(req)
	m.clock.Arm(first, later)
	mp, merr := m.modelCtl.Admit(req)
	m.now = later
	m.clock.Set(m.now)
	if ce, ok := cerr.(core.Error); ok && preCheckable(ce) && laterReadingOnly(merr) && later.After(first) && !sameAnswer(cerr, merr) {
		compareErrors(t, "Admit answered by the pre-check at the first reading", cerr, m.capacityAnswer(t, req, first))
		m.outcomes["Admit: pre-check answered at the first reading"]++
		m.rejected[ce.Reason()]++
		return
	}
	m.compareAdmission(t, "Admit", cp, cerr, mp, merr)
}

// capacityAnswer is the model's answer to req at the first reading of a
// live admission that passed steps 1 to 12, for a ledger whose counters
// have not moved: the current sample (which step 12 accepted, at that
// reading or a fresh one) is presented as observed at that reading, so
// that only duplicate, capacity and feasibility decide.
func (m *diffMachine) capacityAnswer(t *rapid.T, req *core.AdmissionRequest, first time.Time) error {
	sample, ok := m.coreLoad.CurrentLoad()
	if !ok || m.source == nil {
		t.Fatalf("core's pre-check answered without a sample or a source")
	}
	asOfFirst := *sample
	asOfFirst.ObservedAt = first
	load := &model.LoadState{}
	if err := load.Publish(asOfFirst); err != nil {
		t.Fatalf("republishing the current sample: %v", err)
	}
	_, err := m.model.Controller(m.source, load, m.clock).AdmitAt(req, first)
	return err
}

// laterReadingOnly reports whether a model rejection is one of step 13's
// answers to the clock read again: the caller deadline passed, the load
// sample went stale, or a fleet slice passed its deadline.
func laterReadingOnly(err error) bool {
	r, ok := err.(*model.Rejection)
	return ok && (r.Reason == "deadline-exceeded" || r.Reason == "load-unavailable" || r.Reason == "fleet-unavailable")
}

// sameAnswer reports whether a core and a model rejection are the same
// row (compareErrors holds them to it field by field).
func sameAnswer(cerr, merr error) bool {
	r, ok := merr.(*model.Rejection)
	return ok && cerr.Error() == r.Error()
}

// preCheckable reports whether core's lock-free pre-check can give e at
// the first reading: a capacity answer (a fleet slice's included), or a
// fleet slice missing or expired.
func preCheckable(e core.Error) bool {
	return e.Reason() == core.ReasonCapacityExhausted || e.Reason() == core.ReasonFleetUnavailable
}

func (m *diffMachine) compareAdmission(t *rapid.T, op string, cp *core.AdmissionPermit, cerr error, mp *model.Permit, merr error) {
	compareErrors(t, op, cerr, merr)
	if cerr != nil {
		m.outcomes[strings.TrimPrefix(cerr.Error(), "admission.limit: ")]++
		m.rejected[cerr.(core.Error).Reason()]++
		if cp != nil || mp != nil {
			t.Fatalf("%s: a rejection returned a permit", op)
		}
		return
	}
	m.outcomes["admitted"]++
	m.admitted++
	if cp.Grant().ActivationID != mp.Grant().ActivationID || cp.Grant().Revision.Tenant != mp.Grant().Revision.Tenant || cp.Grant().Revision != mp.Grant().Revision {
		t.Fatalf("%s: identity: core %q %q %+v, model %q %q %+v", op, cp.Grant().ActivationID, cp.Grant().Revision.Tenant, cp.Grant().Revision,
			mp.Grant().ActivationID, mp.Grant().Revision.Tenant, mp.Grant().Revision)
	}
	if cp.Grant().Budget != mp.Grant().Budget {
		t.Fatalf("%s: budget: core %+v, model %+v", op, cp.Grant().Budget, mp.Grant().Budget)
	}
	if !cp.Grant().Deadline.Equal(mp.Grant().Deadline) {
		t.Fatalf("%s: deadline: core %v, model %v", op, cp.Grant().Deadline, mp.Grant().Deadline)
	}
	co, mo := cp.Grant().Obligations, mp.Grant().Obligations
	if co.CellClass != mo.CellClass || co.QueueClass != mo.QueueClass || co.TrustClass != mo.TrustClass || co.Priority != mo.Priority ||
		co.Backend != mo.Backend || co.Threading != mo.Threading || co.StateModel != mo.StateModel ||
		!slices.Equal(co.Features.Names(), mo.Features.Names()) || co.CallDepthLimit != mo.CallDepthLimit {
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
	ce, ok := cerr.(core.Error)
	if !ok || !diffKnownErrors[ce] {
		t.Fatalf("%s: core returned %T %v, not a preallocated core.Error", op, cerr, cerr)
	}
	me, ok := merr.(*model.Rejection)
	if !ok {
		t.Fatalf("%s: model returned %T %v", op, merr, merr)
	}
	if string(ce.Code()) != me.Code || string(ce.Scope()) != me.Scope || string(ce.Dimension()) != me.Dimension ||
		string(ce.Reason()) != me.Reason || ce.Retryable() != me.Retryable || ce.Error() != me.Error() {
		t.Fatalf("%s: core answered %q, model answered %q", op, ce.Error(), me.Error())
	}
}

// offset draws a time near now, around the edges a permit deadline has.
func (m *diffMachine) offset(t *rapid.T, label string) time.Time {
	return m.now.Add(gen.Pick(t, []time.Duration{0, time.Nanosecond, 10 * time.Millisecond, 39 * time.Millisecond,
		40 * time.Millisecond, 200 * time.Millisecond, 3 * time.Second}, label))
}

func (m *diffMachine) ensureSchedulable(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := gen.Pick(t, m.permits, "permit")
	at := m.offset(t, "ensure.at")
	compareErrors(t, "EnsureSchedulableAt", pp.core.EnsureSchedulableAt(at), pp.model.EnsureSchedulableAt(at))
}

func (m *diffMachine) startAt(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := gen.Pick(t, m.permits, "permit")
	at := m.offset(t, "start.at")
	ce, cerr := pp.core.StartExecutionAt(at)
	me, merr := pp.model.StartExecutionAt(at)
	m.compareStart(t, "StartExecutionAt", ce, cerr, me, merr)
}

func (m *diffMachine) startNow(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := gen.Pick(t, m.permits, "permit")
	ce, cerr := pp.core.StartExecution()
	me, merr := pp.model.StartExecution()
	m.compareStart(t, "StartExecution", ce, cerr, me, merr)
}

func (m *diffMachine) compareStart(t *rapid.T, op string, ce *core.ExecutionPermit, cerr error, me *model.Permit, merr error) {
	compareErrors(t, op, cerr, merr)
	if cerr != nil {
		m.outcomes["start:"+string(cerr.(core.Error).Reason())]++
		return
	}
	m.outcomes["started"]++
	if ce.Grant().ActivationID != me.Grant().ActivationID || !ce.Grant().Deadline.Equal(me.Grant().Deadline) || ce.Grant().Budget != me.Grant().Budget {
		t.Fatalf("%s: the execution permits differ", op)
	}
	m.executions = append(m.executions, executionPair{core: ce, model: me})
}

func (m *diffMachine) release(t *rapid.T) {
	if len(m.permits) == 0 {
		t.Skip("no permit")
	}
	pp := gen.Pick(t, m.permits, "permit")
	if c, mo := pp.core.Release(), pp.model.Release(); c != mo {
		t.Fatalf("Release: core %v, model %v", c, mo)
	}
}

func (m *diffMachine) releaseExecution(t *rapid.T) {
	if len(m.executions) == 0 {
		t.Skip("no execution")
	}
	ep := gen.Pick(t, m.executions, "execution")
	if c, mo := ep.core.Release(), ep.model.Release(); c != mo {
		t.Fatalf("ExecutionPermit.Release: core %v, model %v", c, mo)
	}
}

func (m *diffMachine) publishBoth(t *rapid.T, s core.LoadSample) error {
	err := m.coreLoad.Publish(s)
	compareErrors(t, "Publish", err, m.modelLoad.Publish(s))
	return err
}

// publish draws a sample, usually good, and publishes it to both, as it
// is or as a sampler measuring whole milliseconds would.
func (m *diffMachine) publish(t *rapid.T) {
	s := gen.Sample(t, m.policy, m.now, m.sequence, m.observed)
	if gen.Chance(t, 1, 4, "publish.millis") {
		ms := gen.Millis(t, s)
		err := m.coreLoad.PublishMillis(ms)
		compareErrors(t, "PublishMillis", err, m.modelLoad.PublishMillis(ms))
		if err == nil {
			m.sequence, m.observed = ms.Sequence, time.UnixMilli(ms.ObservedAtUnixMillis)
		}
		return
	}
	if err := m.publishBoth(t, s); err == nil {
		m.sequence, m.observed = s.Sequence, s.ObservedAt
	}
}

// publishSliceBoth publishes a fleet slice to both; they must agree on
// whether it was refused.
func (m *diffMachine) publishSliceBoth(t *rapid.T, tenant string, slice int64, until time.Time) {
	compareErrors(t, "PublishFleetSlice", m.provider.PublishFleetSlice(tenant, slice, until),
		m.model.PublishFleetSlice(tenant, slice, until))
}

// publishSlice publishes (or withdraws) a fleet slice, usually of a
// fleet-limited tenant and usually good, with a deadline around now.
func (m *diffMachine) publishSlice(t *rapid.T) {
	tenants, _, _ := gen.Names()
	candidates := append(slices.Clone(m.policy.Fleet.Tenants), m.policy.Fleet.Tenants...)
	candidates = append(candidates, append(tenants, "hooli")...)
	tenant := gen.Pick(t, candidates, "fleet.tenant")
	if gen.Chance(t, 1, 8, "fleet.withdraw") {
		if c, mo := m.provider.WithdrawFleetSlice(tenant), m.model.WithdrawFleetSlice(tenant); c != mo {
			t.Fatalf("WithdrawFleetSlice(%q): core %v, model %v", tenant, c, mo)
		}
		return
	}
	slice := int64(gen.Pick(t, []int{0, 1, 2, 3, 1, 2, -1}, "fleet.slice"))
	until := m.now.Add(gen.Pick(t, []time.Duration{time.Second, time.Minute, 10 * time.Millisecond, time.Nanosecond, 0, -time.Nanosecond},
		"fleet.until"))
	if gen.Chance(t, 1, 16, "fleet.until.zero") {
		until = time.Time{}
	}
	m.publishSliceBoth(t, tenant, slice, until)
}

func (m *diffMachine) clearLoad(t *rapid.T) {
	if gen.Chance(t, 7, 8, "clear.skip") {
		t.Skip("a withdrawn sample is rarer than the other steps")
	}
	m.coreLoad.Clear()
	m.modelLoad.Clear()
}

// advance moves the clock forward and, like a sampler's tick, usually
// publishes a fresh good sample; without one the sample ages toward stale.
func (m *diffMachine) advance(t *rapid.T) {
	step := gen.Pick(t, []time.Duration{time.Nanosecond, time.Millisecond, 10 * time.Millisecond, 40 * time.Millisecond,
		150 * time.Millisecond, time.Second}, "advance")
	if gen.Chance(t, 1, 8, "advance.long") {
		step = gen.Pick(t, []time.Duration{3 * time.Second, time.Minute}, "advance.long.step")
	}
	m.now = m.now.Add(step)
	m.clock.Set(m.now)
	if gen.Chance(t, 2, 3, "advance.sample") {
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
	if !gen.Chance(t, 1, 16, "source.none") {
		m.source = gen.Pick(t, m.sources, "source")
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
	tenants, trustClasses, queueClasses := gen.Names()
	for _, name := range append(tenants, "hooli", "") {
		c, cok := m.provider.TenantSnapshot(name)
		mo, mok := m.model.TenantSnapshot(name)
		if c != mo || cok != mok {
			t.Fatalf("tenant %q snapshot: core %+v %v, model %+v %v", name, c, cok, mo, mok)
		}
	}
	for _, name := range append(trustClasses, "ghost") {
		c, cok := m.provider.TrustClassSnapshot(name)
		mo, mok := m.model.TrustClassSnapshot(name)
		if c != mo || cok != mok {
			t.Fatalf("trust class %q snapshot: core %+v %v, model %+v %v", name, c, cok, mo, mok)
		}
	}
	for _, name := range append(queueClasses, "ghost") {
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
	if got := m.provider.Metrics(); got.Admitted != m.admitted || got.Leaked != 0 || !maps.Equal(got.RejectedByReason(), m.rejected) {
		t.Fatalf("operator counters: core %+v, want admitted %d rejected %v", got, m.admitted, m.rejected)
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

// releaseBoth releases every execution and then every admission permit in
// both implementations, which must agree on whether each returned anything.
func releaseBoth(t interface{ Fatalf(string, ...any) }, permits []permitPair, executions []executionPair) {
	for _, ep := range executions {
		if c, m := ep.core.Release(), ep.model.Release(); c != m {
			t.Fatalf("final execution release: core %v, model %v", c, m)
		}
	}
	for _, pp := range permits {
		if c, m := pp.core.Release(), pp.model.Release(); c != m {
			t.Fatalf("final release: core %v, model %v", c, m)
		}
	}
}

// finish releases everything still held and checks both ledgers are empty.
func (m *diffMachine) finish(t *rapid.T) {
	releaseBoth(t, m.permits, m.executions)
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
