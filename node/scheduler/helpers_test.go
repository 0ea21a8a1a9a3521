package scheduler_test

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/scheduler"
	"latent.dev/admission/policy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// rig is a real admission fixture, a pool that agrees with its policy and
// a scheduler over both.
type rig struct {
	node  *nodetest.Node
	pool  *cellpool.FixedCellPool
	sched *scheduler.Scheduler
	// base is every counter before the test admitted anything.
	base state
}

// state is what must come back exactly: the ledger and the pool.
type state struct {
	ledger core.Usage
	pool   [policy.NumCellClasses]cellpool.ClassStats
}

func newRig(t *testing.T, mutate func(*policy.NodeAdmissionPolicy), opts scheduler.Options) *rig {
	t.Helper()
	n := nodetest.New(t, mutate)
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.Provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(n.Provider.Policy(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{node: n, pool: pool, sched: s}
	r.base = r.state()
	t.Cleanup(s.Close)
	return r
}

func (r *rig) state() state {
	st := state{ledger: r.node.Provider.Usage()}
	for class := range policy.NumCellClasses {
		st.pool[class] = r.pool.Stats(policy.CellClass(class))
	}
	return st
}

// settled waits until the scheduler holds nothing, then checks every
// counter is back to the baseline.
func (r *rig) settled(t *testing.T) {
	t.Helper()
	nodetest.Eventually(t, time.Minute, "the scheduler to go quiet", func() bool {
		return r.sched.Executing() == 0 && r.sched.Queued("batch") == 0 && r.sched.Queued("interactive") == 0
	})
	if got := r.state(); !reflect.DeepEqual(got, r.base) {
		t.Fatalf("counters did not come back:\n got %+v\nwant %+v", got, r.base)
	}
}

// holdAll leases every free cell of class, so that nothing dispatches
// until the returned function gives them back.
func (r *rig) holdAll(t *testing.T, class policy.CellClass) func() {
	t.Helper()
	var leases []*cellpool.Lease
	for {
		l, err := r.pool.Acquire(class)
		if err != nil {
			break
		}
		leases = append(leases, l)
	}
	return func() {
		for _, l := range leases {
			l.Release()
		}
	}
}

// job is a scheduler.Job that records what happened to it.
type job struct {
	name string
	// run, if not nil, replaces the default body (end the lease, then
	// release the permit).
	run       func(ctx context.Context, grant *core.Grant, lease *cellpool.Lease)
	started   chan struct{}
	ended     chan struct{}
	abandoned chan error
	onEnd     func(err error)
	log       *dispatchLog
}

func newJob(name string, log *dispatchLog) *job {
	return &job{name: name, log: log, started: make(chan struct{}), ended: make(chan struct{}), abandoned: make(chan error, 1)}
}

func (j *job) Run(ctx context.Context, grant *core.Grant, lease *cellpool.Lease) {
	defer close(j.ended)
	close(j.started)
	if j.log != nil {
		j.log.add(j.name)
	}
	if j.run != nil {
		j.run(ctx, grant, lease)
		return
	}
	lease.Release()
}

// End records why a job never ran; after Run it must come with nil, and
// onEnd, if set, sees the state at that moment.
func (j *job) End(err error) {
	if j.onEnd != nil {
		j.onEnd(err)
	}
	if err != nil {
		j.abandoned <- err
	}
}

// waitAbandoned waits for the scheduler to drop the job.
func (j *job) waitAbandoned(t *testing.T) error {
	t.Helper()
	select {
	case err := <-j.abandoned:
		return err
	case <-j.started:
		t.Fatalf("job %s ran; want it dropped", j.name)
	case <-time.After(time.Minute): // only a hang: a loaded machine is slow
		t.Fatalf("job %s was never dropped", j.name)
	}
	return nil
}

func (j *job) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-j.started:
	case err := <-j.abandoned:
		t.Fatalf("job %s dropped: %v", j.name, err)
	case <-time.After(time.Minute): // only a hang: a loaded machine is slow
		t.Fatalf("job %s never started", j.name)
	}
}

// dispatchLog records the order in which jobs started.
type dispatchLog struct {
	mu    sync.Mutex
	names []string
}

func (l *dispatchLog) add(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
}

func (l *dispatchLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

func (l *dispatchLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

func (r *rig) submit(t *testing.T, ctx context.Context, a nodetest.Ask, j *job) *core.AdmissionPermit {
	t.Helper()
	p := r.node.Admit(t, a)
	if err := r.sched.Submit(ctx, p, j); err != nil {
		t.Fatalf("submit %s: %v", j.name, err)
	}
	return p
}
