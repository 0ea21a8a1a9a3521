package pipeline_test

import (
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// The sampler's queue-delay input is the pool's floor for a class that
// lost cells, and zero for a whole class with nothing queued.
func TestQueueDelayIsRaisedToThePoolsFloor(t *testing.T) {
	r := newRig(t, nil, nil)
	pool := r.pipe.Pool()
	now := time.Now()
	for class, d := range r.pipe.QueueDelay(now) {
		if d != 0 {
			t.Fatalf("class %s: %v with whole pools and nothing queued", policy.CellClass(class), d)
		}
	}
	lease, err := pool.Acquire(policy.Tiny)
	if err != nil {
		t.Fatal(err)
	}
	lease.Quarantine()
	floor := pool.QueueDelayFloor(policy.Tiny)
	if floor == 0 {
		t.Fatal("a quarantined cell left no floor")
	}
	got := r.pipe.QueueDelay(now)
	if got[policy.Tiny] != floor {
		t.Errorf("tiny: %v, want the floor %v", got[policy.Tiny], floor)
	}
	for class, d := range got {
		if policy.CellClass(class) != policy.Tiny && d != pool.QueueDelayFloor(policy.CellClass(class)) {
			t.Errorf("class %s: %v", policy.CellClass(class), d)
		}
	}
	r.pipe.ReplenishAll()
	if d := r.pipe.QueueDelay(now)[policy.Tiny]; d != 0 {
		t.Errorf("after replenishing: %v", d)
	}
}
