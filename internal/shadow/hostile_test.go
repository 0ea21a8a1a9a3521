package shadow

import (
	"math"
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
