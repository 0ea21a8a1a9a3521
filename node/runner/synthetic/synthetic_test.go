package synthetic_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestReusingAnUncertainCellIsAViolation(t *testing.T) {
	cell := cellpool.CellID{Class: policy.Tiny, Slot: 1}
	b := synthetic.New(func(g *runner.Guest) synthetic.Behavior {
		return synthetic.Behavior{UncertainCleanup: string(g.Input) == "dirty"}
	})
	// The runner hands the backend a budget; this guest charges nothing.
	if exit := b.Run(context.Background(), &runner.Guest{Cell: cell, Input: []byte("dirty")}); !exit.CellUncertain {
		t.Fatalf("exit %+v: the cell is not reported uncertain", exit)
	}
	if b.Violations() != 0 {
		t.Fatal("violation before reuse")
	}
	b.Run(context.Background(), &runner.Guest{Cell: cell})
	if b.Violations() != 1 {
		t.Fatalf("violations %d, want 1", b.Violations())
	}
	fresh := cell
	fresh.Generation++
	if exit := b.Run(context.Background(), &runner.Guest{Cell: fresh}); b.Violations() != 1 || exit.CellUncertain {
		t.Fatal("a replacement cell is not the quarantined one")
	}
}

func TestTwoGuestsOnOneCellIsAViolation(t *testing.T) {
	cell := cellpool.CellID{Class: policy.Tiny}
	hold := make(chan struct{})
	started := make(chan struct{})
	b := synthetic.New(func(g *runner.Guest) synthetic.Behavior {
		if string(g.Input) == "first" {
			return synthetic.Behavior{Hold: hold, Started: func() { close(started) }}
		}
		return synthetic.Behavior{}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(context.Background(), &runner.Guest{Cell: cell, Input: []byte("first")})
	}()
	<-started
	b.Run(context.Background(), &runner.Guest{Cell: cell})
	close(hold)
	<-done
	if b.Violations() != 1 || b.Runs() != 2 {
		t.Fatalf("violations %d runs %d", b.Violations(), b.Runs())
	}
}
