package shadow

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/coretrace"
	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/policy"
)

// twice is a decision that reads each of its labels one more time and
// judges the second reading.
type twice struct{ core.Inputs }

func (w twice) First() time.Time { w.Inputs.First(); return w.Inputs.First() }

func (w twice) Step12Since(first time.Time) time.Duration {
	w.Inputs.Step12Since(first)
	return w.Inputs.Step12Since(first)
}

func (w twice) CommitSince(first time.Time) time.Duration {
	w.Inputs.CommitSince(first)
	return w.Inputs.CommitSince(first)
}

func (w twice) Step12Load() (*core.LoadSample, bool) {
	w.Inputs.Step12Load()
	return w.Inputs.Step12Load()
}
func (w twice) CommitLoad() (*core.LoadSample, bool) {
	w.Inputs.CommitLoad()
	return w.Inputs.CommitLoad()
}

// replayWith is Replay of one file under p, the candidate's decisions
// reading through wrap of the replay's own inputs.
func replayWith(t *testing.T, p *policy.NodeAdmissionPolicy, path string, wrap func(core.Inputs) core.Inputs) *Result {
	t.Helper()
	provider, err := core.NewLocalQuotaProvider(p)
	require.NoError(t, err)
	rd, err := trace.Open([]string{path}, 0)
	require.NoError(t, err)
	defer rd.Close()
	r := newReplay(Config{Policy: p, Files: []string{path}}, provider, rd)
	r.inputs = wrap(&r.in)
	require.NoError(t, r.run())
	require.NoError(t, r.passErr)
	return r.result()
}

// A decision that reads its clock and load one more time at each label,
// on a clock that moves at every reading, is recorded with the last
// reading of each label, and its replay is exact whether the candidate
// reads each label once or twice: a replay answers labels, it does not
// count reads.
func TestAReplayStaysExactWhenTheDecisionReadsALabelAgain(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	rec.Clock.Step = 50 * time.Microsecond
	rec.Inputs = func(r *coretrace.Recording) core.Inputs { return twice{r} }
	require.NoError(t, shadowtest.Workload{Decisions: 2000, SampleEvery: 100, Seed: 3}.Run(rec))
	// Then wall times about what the deadline check needs, so that the
	// commit's reading decides some of them.
	require.NoError(t, rec.Publish(0.3, 0.4, 0))
	alice := trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"}
	boundary := [2]int{}
	for i := range 400 {
		rec.Clock.Elapsed += time.Millisecond
		p := rec.Admit(shadowtest.Request{Principal: &alice, Target: trace.Target{Tenant: "acme", Service: "thumbs", Route: "resize"},
			ActivationID: fmt.Sprint("edge-", i), CPUFuel: 100_000_000, MemoryBytes: 8 << 20,
			WallTime: 28*time.Millisecond + time.Duration(i)*20*time.Microsecond})
		if p != nil {
			boundary[1]++
			p.Release()
		} else {
			boundary[0]++
		}
	}
	require.NotZero(t, boundary[0], "no wall time was refused")
	require.NotZero(t, boundary[1], "no wall time was admitted")
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	read := 0
	for _, l := range rec.Lines {
		if l.Decision != nil && len(l.Decision.Since) > 0 && l.Decision.Since[len(l.Decision.Since)-1] != 0 {
			read++
		}
	}
	require.NotZero(t, read, "no decision read a moving clock")

	for name, wrap := range map[string]func(core.Inputs) core.Inputs{
		"once":  func(in core.Inputs) core.Inputs { return in },
		"twice": func(in core.Inputs) core.Inputs { return twice{in} },
	} {
		res := replayWith(t, p, path, wrap)
		assert.True(t, res.Exact, "%s: %v", name, res.Inexact)
		assert.Zero(t, res.Changed, "%s: %+v", name, res.Changes)
		assert.Equal(t, uint64(2400), res.Decisions, name)
		assert.Greater(t, res.RecordedAdmitted, uint64(500), name)
	}
}
