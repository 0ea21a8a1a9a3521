package shadow

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/internal/trace"
)

func TestTimesAtTheEndsOfInt64DoNotHangTheReplay(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 20, SampleEvery: 10, Seed: 6}.Run(rec))
	var last *trace.Decision
	for i := range rec.Lines {
		if rec.Lines[i].Decision != nil {
			last = rec.Lines[i].Decision
		}
	}
	require.NotNil(t, last)
	for _, tt := range []int64{math.MinInt64, math.MaxInt64 - 1, math.MaxInt64} {
		d := *last
		rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDecision, Order: rec.Provider.NextOrder(), T: tt, Decision: &d})
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.EqualValues(t, 23, res.Decisions)
	assert.LessOrEqual(t, len(res.Times), SeriesPoints)
	for i := 1; i < len(res.Times); i++ {
		assert.GreaterOrEqual(t, res.Times[i], res.Times[i-1], "time never runs backwards")
	}
}

func TestAddSat(t *testing.T) {
	assert.Equal(t, int64(math.MaxInt64), addSat(math.MaxInt64, 1))
	assert.Equal(t, int64(math.MaxInt64), addSat(math.MaxInt64-5, 1<<62))
	assert.Equal(t, int64(math.MinInt64), addSat(math.MinInt64, -1))
	assert.Equal(t, int64(3), addSat(1, 2))
	assert.Equal(t, int64(-1), addSat(math.MaxInt64, math.MinInt64))
}

func TestTheRecordedHoldsFollowedAreBounded(t *testing.T) {
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 20, SampleEvery: 10, Seed: 8}.Run(rec))
	var admitted *trace.Decision
	for i := range rec.Lines {
		if d := rec.Lines[i].Decision; d != nil && d.Answer == trace.AnswerAdmitted {
			admitted = d
		}
	}
	require.NotNil(t, admitted)
	// Admissions that are never released: a hostile trace's.
	for range 100 {
		d := *admitted
		rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDecision, Order: rec.Provider.NextOrder(), T: 1, Decision: &d})
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	defer func(n int) { maxOpenHolds = n }(maxOpenHolds)
	maxOpenHolds = 10
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err)
	assert.False(t, res.Exact)
	require.NotEmpty(t, res.Inexact)
	assert.Contains(t, res.Inexact[len(res.Inexact)-1], "recorded admissions past the 10 unreleased ones followed at once")
	for _, s := range res.Series {
		if s.Scope == "node" {
			assert.LessOrEqual(t, maxFloat(s.Recorded), float64(10))
		}
	}
}

func maxFloat(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func TestATornLastLineEndsTheReplayInexactly(t *testing.T) {
	p := loadPolicy(t)
	path, _ := record(t, p, shadowtest.Workload{Decisions: 200, SampleEvery: 50, Seed: 9})
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	// Cut the file in the middle of its last line: a full disk, a crash.
	require.NoError(t, os.WriteFile(path, data[:len(data)-20], 0o600))
	res, err := Replay(Config{Policy: p, Files: []string{path}})
	require.NoError(t, err, "a torn last line is the end of the recording, not a bad trace")
	assert.False(t, res.Exact)
	require.NotEmpty(t, res.Inexact)
	assert.Contains(t, res.Inexact[0], "the recording ends in a torn line ("+path+":")
}
