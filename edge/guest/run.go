package guest

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"math"
	"time"

	"github.com/tetratelabs/wazero"

	"latent.dev/admission/node/runner"
)

// runState is what one instance runs with, kept across activations
// (Backend.runs) so that an activation builds neither its module
// configuration nor its fuel clock anew: the configuration, built once,
// reads standard input from stdin, writes standard output to out and
// sleeps until ctx ends, and each activation resets those (begin). Only
// the instance's goroutine uses a run state, and it goes back to the
// pool only once its instance has closed cleanly (end).
type runState struct {
	config wazero.ModuleConfig
	stdin  bytes.Reader
	out    boundedOutput
	memory meteredMemory
	fuel   fuelClock
	// ctx is the run's context: a guest's nanosleep ends with it.
	ctx context.Context
}

func newRunState() *runState {
	rs := &runState{}
	rs.config = wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdin(&rs.stdin).
		WithStdout(&rs.out).
		WithStderr(io.Discard).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(rs.sleep).
		WithRandSource(rand.Reader)
	return rs
}

// takeRun is a kept run state, or a new one.
func (b *Backend) takeRun() *runState {
	if rs, _ := b.runs.Get().(*runState); rs != nil {
		return rs
	}
	return newRunState()
}

// begin readies rs for one activation of g under runCtx, whose initial
// memory (charged already) is charged bytes.
func (rs *runState) begin(runCtx context.Context, cancel context.CancelCauseFunc, g *runner.Guest, maxOutput int64,
	memories *memoryPool, charged uint64) {
	rs.ctx = runCtx
	rs.stdin.Reset(g.Input)
	rs.out = boundedOutput{limit: maxOutput, cancel: cancel}
	rs.memory.reset(g.Meter, memories, charged)
}

// end drops what rs holds of the activation that ran, handing its
// memory's array to the pool, once its instance has closed.
func (rs *runState) end() {
	rs.memory.recycle()
	rs.memory = meteredMemory{}
	rs.stdin.Reset(nil)
	rs.out = boundedOutput{}
	rs.ctx = nil
}

// sleep is the guests' nanosleep: real time, but never past the run's
// end, so a sleeping guest cannot hold its cell beyond its deadline or
// fuel.
func (rs *runState) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(min(ns, math.MaxInt64)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-rs.ctx.Done():
	}
}
