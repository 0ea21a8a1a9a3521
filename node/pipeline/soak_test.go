package pipeline_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

// soakBehaviors is the mix the soak draws from, by input name.
var soakBehaviors = map[string]synthetic.Behavior{
	"success":   {},
	"slow":      {Duration: 2 * time.Millisecond},
	"declared":  {Exit: runner.ExitDeclaredError},
	"trap":      {Exit: runner.ExitTrapped},
	"fuel":      {Fuel: 2_000_000},
	"memory":    {Memory: 2 << 20},
	"platform":  {Exit: runner.ExitPlatformFailure},
	"uncertain": {UncertainCleanup: true},
	"panic":     {Panic: true},
	"deadline":  {Block: true},
	"cancel":    {Block: true},
}

var soakInputs = func() []string {
	var names []string
	for name := range soakBehaviors {
		names = append(names, name)
	}
	return names
}()

// TestSoak runs the full pipeline under concurrent load with every
// outcome, caller cancellations, admission rejections, quarantines and a
// repair loop that publishes the pool's conservative delays; at the end
// every counter is back to its baseline.
func TestSoak(t *testing.T) { soak(t, 16, 1500) }

// TestSoakLong is the opt-in long variant: LATENT_SOAK=1.
func TestSoakLong(t *testing.T) {
	if testing.Short() || os.Getenv("LATENT_SOAK") == "" {
		t.Skip("set LATENT_SOAK=1 to run")
	}
	soak(t, 32, 100_000)
}

func soak(t *testing.T, workers, total int) {
	// The example policy, with tenant limits wide enough that the workers
	// mostly run rather than spin on capacity rejections (which still
	// happen, at the trust-class and node scopes).
	r := newRig(t, func(p *policy.NodeAdmissionPolicy) {
		for i := range p.Tenants {
			p.Tenants[i].Limits = policy.Limits{MaxLiveActivations: 32, MaxQueuedReservations: 32,
				MaxReservedCPUFuel: 1 << 40, MaxReservedMemoryBytes: 1 << 32}
		}
	}, synthetic.ByInput(soakBehaviors))
	stopRepair := make(chan struct{})
	var repair sync.WaitGroup
	repair.Go(func() { repairLoop(t, r, stopRepair) })

	var (
		mu       sync.Mutex
		tally    = map[string]int{}
		issued   int
		sequence = make(chan int, total)
	)
	for i := range total {
		sequence <- i
	}
	close(sequence)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range sequence {
				input := soakInputs[rng.IntN(len(soakInputs))]
				ask := nodetest.Ask{Tenant: []string{"acme", "globex", "initech"}[rng.IntN(3)], Priority: uint32(rng.IntN(5))}
				if input == "deadline" {
					ask.WallTime = 150 * time.Millisecond
				}
				ctx, cancel := context.WithCancel(context.Background())
				if input == "cancel" {
					time.AfterFunc(time.Millisecond, cancel)
				}
				_, err := r.pipe.Invoke(ctx, r.node.Controller, nodetest.Request(ask), []byte(input))
				cancel()
				kind := classifyErr(t, err)
				if kind == "rejected" {
					// A retryable rejection: back off as a client would,
					// instead of spinning on the admission fast path.
					time.Sleep(200 * time.Microsecond)
				}
				mu.Lock()
				tally[kind]++
				issued++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stopRepair)
	repair.Wait()
	r.pipe.Drain()
	r.pipe.ReplenishAll()

	got := r.pipe.Counters()
	if !got.Equal(r.base) {
		t.Fatalf("counters did not come back:\n%s", strings.Join(got.Diff(r.base), "\n"))
	}
	if v := r.backend.Violations(); v != 0 {
		t.Fatalf("%d cell violations", v)
	}
	s, rs := r.pipe.Scheduler().Stats(), r.pipe.Runner().Stats()
	var ran int64
	for _, n := range rs.Outcomes {
		ran += n
	}
	if s.Started != ran || s.Submitted != s.Started+s.Canceled+s.Expired+s.Closed+s.StartError {
		t.Fatalf("scheduler %+v, runner %+v", s, rs)
	}
	if r.node.Provider.Metrics().Leaked != 0 {
		t.Fatal("a permit was reclaimed by the garbage collector instead of released")
	}
	t.Logf("%d calls: %v; runner %v; quarantined %d; rejections %v", issued, tally, rs.Outcomes, rs.Quarantined, r.node.Provider.Metrics().RejectedByReason())
}

// classifyErr sorts an Invoke error into what the soak allows.
func classifyErr(t *testing.T, err error) string {
	var ce core.Error
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &ce):
		if !ce.Retryable() {
			t.Errorf("non-retryable admission rejection: %v", err)
		}
		return "rejected"
	case errors.Is(err, context.Canceled):
		return "caller-left"
	}
	for _, known := range []error{scheduler.ErrCanceled, scheduler.ErrExpired, runner.ErrDeclared, runner.ErrTrapped,
		runner.ErrDeadlineExceeded, runner.ErrFuelExhausted, runner.ErrMemoryExhausted, runner.ErrCanceled,
		runner.ErrPlatformFailure} {
		if errors.Is(err, known) {
			return known.Error()
		}
	}
	t.Errorf("unexpected error %v", err)
	return "unexpected"
}

// repairLoop is what a node's sampler and repair loop do about
// quarantined cells: publish the pool's conservative delay at once, then
// replace the cell and publish again.
func repairLoop(t *testing.T, r *rig, stop <-chan struct{}) {
	sequence := uint64(1 << 32)
	publish := func() {
		sequence++
		now := time.Now()
		err := r.node.Load.Publish(core.LoadSample{Sequence: sequence, ObservedAt: now, CPUPressure: 0.1, MemoryPressure: 0.1, QueueDelay: r.pipe.QueueDelay(now)})
		if err != nil {
			t.Errorf("publish: %v", err)
		}
	}
	for {
		changed := r.pipe.Pool().Changed()
		if r.pipe.Counters().Cells[0].Quarantined > 0 {
			publish()
			r.pipe.ReplenishAll()
			publish()
		}
		select {
		case <-changed:
		case <-stop:
			return
		}
	}
}
