package shadow

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/catalog"
	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

func loadPolicy(t testing.TB) *policy.NodeAdmissionPolicy {
	t.Helper()
	data, err := os.ReadFile("../../testdata/policy/node.json")
	require.NoError(t, err)
	p, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	return p
}

func catalogJSON(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/catalog/good.json")
	require.NoError(t, err)
	return data
}

// record runs a workload on a recording provider and writes its trace.
func record(t testing.TB, p *policy.NodeAdmissionPolicy, w shadowtest.Workload) (string, *shadowtest.Recorder) {
	t.Helper()
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, w.Run(rec))
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	return path, rec
}

func tenant(p *policy.NodeAdmissionPolicy, name string) *policy.TenantPolicy {
	for i := range p.Tenants {
		if p.Tenants[i].ID == name {
			return &p.Tenants[i]
		}
	}
	panic(name)
}

func TestACoreRecordedTraceReplaysExactlyUnderItsPolicy(t *testing.T) {
	p := loadPolicy(t)
	path, rec := record(t, p, shadowtest.Workload{Decisions: 3000, SampleEvery: 100, Seed: 1})
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.True(t, res.Exact, "%v", res.Inexact)
	assert.Zero(t, res.Changed, "%+v", res.Changes)
	assert.Equal(t, uint64(3000), res.Decisions)
	assert.Equal(t, res.RecordedAdmitted, res.CandidateAdmitted)
	assert.Zero(t, res.Estimated)
	// The workload is mixed: admissions and refusals of several kinds.
	reasons := map[string]uint64{}
	for _, r := range res.Refusals {
		assert.Equal(t, r.Recorded, r.Candidate, "%+v", r)
		reasons[r.Reason] += r.Recorded
	}
	assert.Greater(t, res.RecordedAdmitted, uint64(1000))
	for _, want := range []string{"capacity-exhausted", "node-overloaded", "unauthenticated", "principal-not-authorized",
		"revision-not-available", "placement-not-compatible", "deadline-exceeded"} {
		assert.NotZero(t, reasons[want], "no %s in the workload: %v", want, reasons)
	}
	// Every move was recorded: the recorder's ledger drained.
	assert.Empty(t, rec.Provider.Usage().Held())
	// The series follow the recorded answers exactly under the same policy.
	require.NotEmpty(t, res.Times)
	for _, s := range res.Series {
		assert.Equal(t, s.Recorded, s.Candidate, s.Scope)
	}
}

func TestTheRecordedOrderIsRestoredFromShuffledLines(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 1000, SampleEvery: 100, Seed: 2}.Run(rec))
	// Swap neighbours, as a recorder's concurrent writers would.
	for i := 1; i+1 < len(rec.Lines); i += 3 {
		rec.Lines[i], rec.Lines[i+1] = rec.Lines[i+1], rec.Lines[i]
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.True(t, res.Exact, "%v", res.Inexact)
	assert.Zero(t, res.Changed, "%+v", res.Changes)
}

func TestALowerTenantLimitRefusesThatTenantOnly(t *testing.T) {
	p := loadPolicy(t)
	path, _ := record(t, p, shadowtest.Workload{Decisions: 3000, SampleEvery: 100, Seed: 1})
	cand := loadPolicy(t)
	tenant(cand, "acme").Limits.MaxLiveActivations = 2
	res, err := Replay(Config{Policy: cand, Files: []string{path}})
	require.NoError(t, err)
	assert.True(t, res.Exact)
	require.NotZero(t, res.Changed)
	assert.Less(t, res.CandidateAdmitted, res.RecordedAdmitted)
	for _, r := range res.Refusals {
		switch {
		case r.Tenant == "acme" && r.Reason == "capacity-exhausted":
			assert.Greater(t, r.Candidate, r.Recorded)
		case r.Tenant == "acme":
			assert.LessOrEqual(t, r.Candidate, r.Recorded) // now refused for capacity first
		default:
			assert.Equal(t, r.Recorded, r.Candidate, "%+v", r)
		}
	}
	require.Len(t, res.Changes, KeptChanges)
	for _, c := range res.Changes {
		assert.Equal(t, "acme", c.Tenant)
		assert.NotEqual(t, "capacity-exhausted", c.Recorded.Answer)
		assert.Equal(t, Answer{"capacity-exhausted", "tenant", "live-activations"}, c.Candidate)
		assert.False(t, c.Time.Before(res.Start))
	}
	var acme *Series
	for i := range res.Series {
		if res.Series[i].Scope == "tenant acme" {
			acme = &res.Series[i]
		}
	}
	require.NotNil(t, acme)
	assert.Equal(t, uint64(2), acme.Limit)
	for i := range acme.Candidate {
		assert.LessOrEqual(t, acme.Candidate[i], 2.0)
	}
	assert.Greater(t, maxOf(acme.Recorded), 2.0)
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func TestARefusalTheCandidateAdmitsHoldsForTheMedian(t *testing.T) {
	p := loadPolicy(t)
	tenant(p, "acme").Limits.MaxLiveActivations = 1
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	alice := &trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}
	target := trace.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}
	at := func(ms int) { rec.Clock.Elapsed = time.Duration(ms) * time.Millisecond }
	n := 0
	admit := func() bool {
		n++
		return rec.Admit(shadowtest.Request{Principal: alice, Target: target, ActivationID: "a" + strings.Repeat("x", n),
			CPUFuel: 1000, MemoryBytes: 1 << 20}) != nil
	}
	hold := func(from, to int) {
		at(from)
		require.NoError(t, rec.Publish(0.1, 0.1, 0))
		p := rec.Admit(shadowtest.Request{Principal: alice, Target: target, ActivationID: "h" + strings.Repeat("x", from),
			CPUFuel: 1000, MemoryBytes: 1 << 20})
		require.NotNil(t, p)
		ep, err := p.StartExecution()
		require.NoError(t, err)
		at(to)
		ep.Release()
	}
	hold(0, 10)  // 10ms
	hold(20, 40) // 20ms
	hold(50, 80) // 30ms; with B1's 100ms below, the median is 25ms
	at(100)
	require.NoError(t, rec.Publish(0.1, 0.1, 0))
	b1 := rec.Admit(shadowtest.Request{Principal: alice, Target: target, ActivationID: "b1", CPUFuel: 1000, MemoryBytes: 1 << 20})
	require.NotNil(t, b1)
	at(110)
	require.False(t, admit()) // B2: refused, the candidate admits it and holds it until 135ms
	at(133)
	require.False(t, admit()) // C1: refused by both, B1 and B2 held
	at(136)
	require.False(t, admit()) // C2: refused, the candidate admits it (B2 was released at 135ms)
	at(200)
	b1.Release()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))

	cand := loadPolicy(t)
	tenant(cand, "acme").Limits.MaxLiveActivations = 2
	res, err := Replay(Config{Policy: cand, Files: []string{path}})
	require.NoError(t, err)
	assert.True(t, res.Exact, "%v", res.Inexact)
	assert.Equal(t, uint64(2), res.Estimated)
	require.Len(t, res.Changes, 2)
	assert.Equal(t, "ax", res.Changes[0].ActivationID)
	assert.Equal(t, "axxx", res.Changes[1].ActivationID)
	assert.Equal(t, res.Start.Add(136*time.Millisecond), res.Changes[1].Time)
	for _, c := range res.Changes {
		assert.Equal(t, "capacity-exhausted", c.Recorded.Answer)
		assert.True(t, c.Candidate.Admitted())
	}
}

func TestADroppedLineMakesTheReplayInexact(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 200, SampleEvery: 50, Seed: 3}.Run(rec))
	rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDropped, Order: rec.Provider.NextOrder(), T: 1, Dropped: &trace.Dropped{Lines: 3}})
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.False(t, res.Exact)
	assert.Equal(t, []string{"3 lines dropped by the recorder"}, res.Inexact)
}

func TestAnOverrideCatalogReplacesTheTraces(t *testing.T) {
	p := loadPolicy(t)
	path, _ := record(t, p, shadowtest.Workload{Decisions: 500, SampleEvery: 50, Seed: 4})
	empty, err := json2catalog(`{"capacity":{"max_revisions":4,"max_policy_bytes":4096},"deployments":[]}`)
	require.NoError(t, err)
	res, err := Replay(Config{Policy: p, Catalog: &empty, Files: []string{path}})
	require.NoError(t, err)
	assert.True(t, res.Exact)
	assert.Zero(t, res.CandidateAdmitted)
	for _, c := range res.Changes {
		if c.Recorded.Admitted() {
			assert.Equal(t, "revision-not-available", c.Candidate.Answer)
		}
	}
}

func TestABadLineIsNamed(t *testing.T) {
	p := loadPolicy(t)
	path, _ := record(t, p, shadowtest.Workload{Decisions: 20, SampleEvery: 10, Seed: 5})
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	lines[5] = strings.Replace(lines[5], `"order"`, `"ordre"`, 1)
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644))
	_, err = Replay(Config{Policy: p, Files: []string{path}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":6: ")
	assert.Contains(t, err.Error(), `unknown field "ordre"`)
}

func json2catalog(s string) (catalog.File, error) { return catalog.DecodeCatalogFile([]byte(s), true) }

// filepathTemp is a directory for the benchmark's trace, removed when the
// test binary's TestMain would; the OS's temporary directory otherwise.
func filepathTemp() (string, error) { return os.MkdirTemp("", "shadow-bench-") }

func TestADecisionOnAGenerationNotYetChangedMakesTheReplayInexact(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 50, SampleEvery: 10, Seed: 4}.Run(rec))
	var last *trace.Decision
	for i := range rec.Lines {
		if rec.Lines[i].Decision != nil {
			last = rec.Lines[i].Decision
		}
	}
	require.NotNil(t, last)
	future := *last
	future.Generation += 5
	rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDecision, Order: rec.Provider.NextOrder(), T: 1, Decision: &future})
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.False(t, res.Exact)
	assert.Equal(t, []string{"1 decisions resolved in a catalog generation whose change came later in the trace"}, res.Inexact)
}
