package shadow

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/shadow/shadowtest"
	"latent.dev/admission/internal/trace"
)

// floodTrace is a trace with a flood of refusals before authentication,
// each with an invented 1,000-byte tenant and an answer of its own.
func floodTrace(t *testing.T, n int) string {
	t.Helper()
	p := loadPolicy(t)
	rec, err := shadowtest.NewRecorder(p, catalogJSON(t))
	require.NoError(t, err)
	require.NoError(t, shadowtest.Workload{Decisions: 200, SampleEvery: 50, Seed: 7}.Run(rec))
	pad := strings.Repeat("t", 1000)
	for i := range n {
		name := fmt.Sprintf("%s-%06d", pad, i)
		rec.Lines = append(rec.Lines, trace.Line{Kind: trace.KindDecision, Order: rec.Provider.NextOrder(), T: 1,
			Decision: &trace.Decision{Stage: trace.StageEdge, Target: trace.Target{Tenant: name, Service: name, Route: name},
				ActivationID: name, Answer: "made-up-" + name}})
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	require.NoError(t, rec.Write(path))
	return path
}

func TestTheRefusalTableIsBounded(t *testing.T) {
	path := floodTrace(t, 5000)
	res, err := Replay(Config{Policy: loadPolicy(t), Files: []string{path}})
	require.NoError(t, err)
	tenants := map[string]bool{}
	reasons := map[string]bool{}
	var recorded uint64
	for _, r := range res.Refusals {
		tenants[r.Tenant] = true
		reasons[r.Reason] = true
		recorded += r.Recorded
		assert.LessOrEqual(t, len(r.Tenant), MaxNameBytes+len("…"))
	}
	assert.LessOrEqual(t, len(tenants), KeptTenants+1)
	assert.True(t, tenants[OtherTenants])
	assert.True(t, reasons[OtherAnswer])
	assert.Less(t, len(reasons), len(knownAnswers)+2, "made-up answers are one row")
	rec, _ := res.Refused()
	assert.Equal(t, rec, recorded, "no refusal is lost in the folding")
	for _, c := range res.Changes {
		for _, s := range []string{c.Tenant, c.Service, c.Route, c.ActivationID, c.Recorded.Answer} {
			assert.LessOrEqual(t, len(s), MaxNameBytes+len("…"))
		}
	}
	var page bytes.Buffer
	require.NoError(t, WriteReport(&page, res))
	assert.Less(t, page.Len(), 1<<20, "the report of a flood stays small")
}

func TestTopTenantsKeepsTheMostRefused(t *testing.T) {
	rows := map[[2]string]*Refusals{}
	for i := range KeptTenants + 10 {
		name := fmt.Sprintf("t%03d", i)
		rows[[2]string{name, "capacity-exhausted"}] = &Refusals{Tenant: name, Reason: "capacity-exhausted", Recorded: uint64(i)}
	}
	out := topTenants(rows)
	require.Len(t, out, KeptTenants+1)
	assert.Equal(t, "t010", out[0].Tenant, "the ten least refused are folded")
	last := out[len(out)-1]
	assert.Equal(t, Refusals{Tenant: OtherTenants, Reason: "capacity-exhausted", Recorded: 0 + 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9}, last)
}
