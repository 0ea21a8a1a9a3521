package pipeline_test

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rig is a real node: admission fixture, pipeline and synthetic backend.
type rig struct {
	node    *nodetest.Node
	pipe    *pipeline.Pipeline
	backend *synthetic.Backend
	base    pipeline.Counters
}

func newRig(t *testing.T, mutate func(*policy.NodeAdmissionPolicy), plan synthetic.Plan) *rig {
	t.Helper()
	n := nodetest.New(t, mutate)
	b := synthetic.New(plan)
	p, err := pipeline.New(n.Provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &rig{node: n, pipe: p, backend: b, base: p.Counters()}
}

// quiet waits until nothing is queued or executing.
func (r *rig) quiet(t *testing.T) pipeline.Counters {
	t.Helper()
	var c pipeline.Counters
	nodetest.Eventually(t, time.Minute, "the pipeline to go quiet", func() bool {
		c = r.pipe.Counters()
		return len(c.Residue()) == 0
	})
	return c
}

// settled checks every counter is back to the baseline.
func (r *rig) settled(t *testing.T) {
	t.Helper()
	if got := r.quiet(t); !got.Equal(r.base) {
		t.Fatalf("counters did not come back:\n%s", strings.Join(got.Diff(r.base), "\n"))
	}
	if v := r.backend.Violations(); v != 0 {
		t.Fatalf("%d cell violations", v)
	}
}

// ledgerOnly is c with the pool's cells taken out, for comparing across a
// quarantine.
func ledgerOnly(c pipeline.Counters) pipeline.Counters {
	c.Cells = [policy.NumCellClasses]cellpool.ClassStats{}
	return c
}

func newPipeline(n *nodetest.Node, b runner.Backend) (*pipeline.Pipeline, error) {
	return pipeline.New(n.Provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": b}})
}
