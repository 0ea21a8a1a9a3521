package latentd

import (
	"context"
	"errors"
	"testing"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/policy"
)

func TestNewRefusesCellsWhoseCallStacksTheMachineCannotHold(t *testing.T) {
	// 2·65,536 cells of 256 MiB each: 32 TiB.
	cfg := testConfig(t, newFakeGuests(), nodeOptions{policy: func(p *policy.NodeAdmissionPolicy) {
		for i := range p.CellClasses {
			p.CellClasses[i].Parallelism = policy.MaxCellParallelism
		}
	}})
	n, err := New(cfg)
	if err == nil {
		_ = n.Shutdown(context.Background())
		t.Fatal("New started a node whose call stacks cannot fit")
	}
	if !errors.Is(err, guest.ErrStackMemory) {
		t.Fatalf("New: %v, want guest.ErrStackMemory", err)
	}
	t.Log(err)
}
