package scheduler_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// goroutineID is the calling goroutine's number, from the header of its
// stack trace ("goroutine 42 [running]:").
func goroutineID(t *testing.T) uint64 {
	var buf [64]byte
	header := buf[:runtime.Stack(buf[:], false)]
	field, _, _ := bytes.Cut(bytes.TrimPrefix(header, []byte("goroutine ")), []byte(" "))
	id, err := strconv.ParseUint(string(field), 10, 64)
	if err != nil {
		t.Errorf("no goroutine number in %q", header)
	}
	return id
}

// TestWorkersAreKeptForTheNextActivation runs three times as many
// activations as there are cells, one after another: they run on at
// most one goroutine per cell, kept from one activation to the next,
// never on a goroutine each.
func TestWorkersAreKeptForTheNextActivation(t *testing.T) {
	r := newRig(t, nil, scheduler.Options{})
	var cells uint64
	for class := range policy.NumCellClasses {
		cells += r.pool.Stats(policy.CellClass(class)).Configured
	}
	ids := map[uint64]bool{}
	for i := range 3 * cells {
		j := newJob("sequential-"+strconv.FormatUint(i, 10), nil)
		var id uint64
		j.run = func(_ context.Context, _ *core.Grant, lease *cellpool.Lease) {
			id = goroutineID(t)
			lease.Release()
		}
		r.submit(t, context.Background(), nodetest.Ask{}, j)
		j.waitStarted(t)
		<-j.ended
		nodetest.Eventually(t, time.Minute, "the activation to end", func() bool { return r.sched.Executing() == 0 })
		ids[id] = true
	}
	if uint64(len(ids)) > cells {
		t.Fatalf("%d activations ran on %d goroutines, more than the %d cells", 3*cells, len(ids), cells)
	}
	if w := r.sched.Workers(); w != len(ids) {
		t.Fatalf("Workers() = %d, but activations ran on %d kept goroutines", w, len(ids))
	}
	r.settled(t)
}

// TestCloseWhileEveryWorkerIsBusy starts an activation while every
// worker still runs one (jobs that give their cell back before they
// return, so that the cells outnumber the idle workers): the dispatcher
// waits for a worker, and a Close meanwhile runs the activation on a
// goroutine of its own instead, and waits for it.
func TestCloseWhileEveryWorkerIsBusy(t *testing.T) {
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) {
		for _, c := range []string{"tiny", "small", "standard", "extra-large"} {
			nodetest.Parallelism(p, c, 1)
		}
	}, scheduler.Options{})
	workers := 4 // one per cell
	proceed := make(chan struct{})
	jobs := make([]*job, workers+1)
	for i := range jobs {
		jobs[i] = newJob("busy-"+strconv.Itoa(i), nil)
		jobs[i].run = func(_ context.Context, _ *core.Grant, lease *cellpool.Lease) {
			lease.Release()
			<-proceed
		}
		r.submit(t, context.Background(), nodetest.Ask{}, jobs[i])
		if i < workers {
			jobs[i].waitStarted(t)
		}
	}
	// The last one is taken off its queue onto the one tiny cell, and
	// waits for a worker.
	nodetest.Eventually(t, time.Minute, "the last activation to be dispatched", func() bool {
		return r.sched.Executing() == workers+1
	})
	closed := make(chan struct{})
	go func() {
		r.sched.Close()
		close(closed)
	}()
	jobs[workers].waitStarted(t)
	select {
	case <-closed:
		t.Fatal("Close returned while activations were running")
	case <-time.After(20 * time.Millisecond):
	}
	close(proceed)
	<-closed
	r.settled(t)
}
