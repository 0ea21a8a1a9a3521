package scheduler

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v3"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/policy"
)

// DefaultStarvationBound is how many consecutive dispatches from higher
// queue classes a waiting lower class tolerates when Options leaves the
// bound zero.
const DefaultStarvationBound = 8

// Job is the work that travels with a permit. The scheduler calls Run at
// most once, then End exactly once; the scheduler alone releases the
// permit, so a job never does.
type Job interface {
	// Run executes the activation on the leased cell, on one of the
	// scheduler's worker goroutines (one activation at a time each), which
	// the scheduler waits for at Close. grant is the permit's grant,
	// taken once at Submit; the execution permit itself stays the
	// scheduler's, which releases it when Run returns. The lease is Run's to
	// end (release or quarantine) once the guest has stopped and
	// accounting is final. ctx is the submit context bounded by the
	// permit's deadline. Should Run return with the lease still held, the
	// scheduler quarantines the cell (its state is unknown).
	Run(ctx context.Context, grant *core.Grant, lease *cellpool.Lease)
	// End is the last call: the permit has been released, so the
	// reservation is back. err is nil when Run ran, else why the
	// activation never ran.
	End(err error)
}

// Options tune a scheduler; the zero value takes every default.
type Options struct {
	// Clock is read for EnsureSchedulableAt before each cell allocation;
	// nil is the system clock. Queued expiry timers always run on real
	// time.
	Clock deadline.Clock
	// Weights are per-tenant DRR weights; a tenant not listed weighs 1.
	Weights map[string]uint32
	// QueueBounds are per queue class (by name) bounds on queued
	// activations; a class not listed takes its admission bound
	// (max_queued). A bound of zero refuses every activation of the class.
	QueueBounds map[string]int
	// StarvationBound is how many consecutive dispatches from higher
	// classes a waiting lower class tolerates before it is served; zero
	// means DefaultStarvationBound.
	StarvationBound int
}

// Stats are the scheduler's counters since New.
type Stats struct {
	Submitted  int64 // accepted into a queue
	Refused    int64 // refused by Submit (full, closed, expired, canceled, invalid)
	Canceled   int64 // dropped from a queue because the submit context was done
	Expired    int64 // dropped from a queue or at start because the deadline passed
	Closed     int64 // dropped from a queue by Close
	Started    int64 // handed to Job.Run
	Orphaned   int64 // cells quarantined because Run returned holding the lease
	StartError int64 // StartExecution refused for a reason other than expiry
}

type stats struct {
	submitted, refused, canceled, expired, closed, started, orphaned, startError *xsync.Counter
}

// Scheduler queues admitted activations per (cell class, queue class)
// and dispatches them onto cells of a [cellpool.FixedCellPool]: higher
// priority queue classes first, with a starvation bound for lower ones,
// and deficit round robin across tenants within a class. One dispatcher
// goroutine allocates cells; each started activation runs on a worker
// goroutine, at most one worker per cell, each kept for the next
// activation. Close stops and waits for all of them.
//
// The scheduler has one lock, mu: a method named …Locked is called with
// mu held, and each field says how it is shared: set by New and never
// changed after, guarded by mu, owned by the dispatcher goroutine, or
// atomic. Lock order: mu, then the pool's (cellpool.FixedCellPool.mu).
// The ledger mutex (inside permit calls) and Job methods are never
// entered with mu held.
//
// A Scheduler must not be copied after first use.
type Scheduler struct {
	noCopy noCopy

	// Set by New, never changed after.
	pool      *cellpool.FixedCellPool
	clock     deadline.Clock // nil: time.Now (see now)
	queueRank map[string]int // queue class name -> rank, 0 the highest priority (Queued asks by name)
	// rankOf is, by priority (0 to the node's maximum, at most 65,535),
	// the rank of the queue class that holds it, -1 for one no class
	// holds: the permit's queue class in one index, without a name.
	rankOf     []int32
	queueNames []string        // by rank
	waits      []waitHistogram // by rank; the slice never changes, its buckets are atomic
	bounds     []int           // by rank
	weights    map[string]uint32
	starvation int
	pooled     [policy.NumCellClasses]bool
	kick       chan struct{} // capacity 1: "look again"
	closing    chan struct{} // closed by Close: the dispatcher exits
	stats      stats         // xsync counters

	dispatcher sync.WaitGroup // the dispatch loop
	running    sync.WaitGroup // started activations whose Job.End has not returned
	watchers   sync.WaitGroup // registered queued-cancellation callbacks
	workers    sync.WaitGroup // worker goroutines
	// handoff takes a started activation to an idle worker; maxWorkers
	// (the pool's cells, set by New) bounds the workers, workerCount
	// counts them.
	handoff    chan startedItem
	maxWorkers int
	// workerCount is owned by the dispatcher goroutine (hand), which
	// alone reads and writes it; no lock.
	workerCount int
	// kept mirrors workerCount, atomically, for readers on other
	// goroutines ([Scheduler.Workers]).
	kept atomic.Int64

	// mu guards the fields below it.
	mu        sync.Mutex
	idle      sync.Cond                          // idle.L is &mu; broadcast when queued+executing reaches zero
	accepting bool                               // guarded by mu
	closed    bool                               // guarded by mu
	queues    [policy.NumCellClasses][]fairQueue // guarded by mu; [cell][rank]
	skipped   [policy.NumCellClasses][]int       // guarded by mu; [cell][rank] higher-class dispatches while waiting
	waiting   [policy.NumCellClasses]int         // guarded by mu; items queued per cell class
	queued    []int                              // guarded by mu; items queued per rank, across cell classes
	executing int                                // guarded by mu; taken by the dispatcher and not yet finished
}

// New builds a scheduler for the queue classes of c over pool and starts
// its dispatcher.
func New(c *policy.Compiled, pool *cellpool.FixedCellPool, opts Options) (*Scheduler, error) {
	if opts.StarvationBound < 0 {
		return nil, ErrInvalidOptions
	}
	for _, w := range opts.Weights {
		if w == 0 {
			return nil, ErrInvalidOptions
		}
	}
	type class struct {
		id policy.QueueClassID
		policy.QueueClassSettings
	}
	classes := make([]class, c.NumQueueClasses())
	for i := range classes {
		classes[i] = class{policy.QueueClassID(i), c.QueueClass(policy.QueueClassID(i))}
	}
	slices.SortFunc(classes, func(a, b class) int { return cmp.Compare(b.MinPriority, a.MinPriority) })
	s := &Scheduler{
		pool:       pool,
		clock:      opts.Clock,
		queueRank:  make(map[string]int, len(classes)),
		rankOf:     make([]int32, uint64(c.Node().MaximumPriority)+1),
		queueNames: make([]string, len(classes)),
		waits:      make([]waitHistogram, len(classes)),
		bounds:     make([]int, len(classes)),
		weights:    make(map[string]uint32, len(opts.Weights)),
		starvation: opts.StarvationBound,
		kick:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		handoff:    make(chan startedItem),
		accepting:  true,
		queued:     make([]int, len(classes)),
		stats: stats{xsync.NewCounter(), xsync.NewCounter(), xsync.NewCounter(), xsync.NewCounter(),
			xsync.NewCounter(), xsync.NewCounter(), xsync.NewCounter(), xsync.NewCounter()},
	}
	if s.starvation == 0 {
		s.starvation = DefaultStarvationBound
	}
	for name, w := range opts.Weights {
		s.weights[name] = w
	}
	rankOfID := make([]int32, len(classes))
	for rank, q := range classes {
		s.queueRank[q.Name] = rank
		rankOfID[q.id] = int32(rank)
		s.queueNames[rank] = q.Name
		s.bounds[rank] = int(min(q.MaxQueued, uint64(maxInt)))
		if b, ok := opts.QueueBounds[q.Name]; ok {
			if b < 0 {
				return nil, ErrInvalidOptions
			}
			s.bounds[rank] = b
		}
	}
	for priority := range s.rankOf {
		s.rankOf[priority] = -1
		if id, ok := c.QueueClassFor(uint32(priority)); ok {
			s.rankOf[priority] = rankOfID[id]
		}
	}
	for class := range policy.NumCellClasses {
		configured := pool.Stats(policy.CellClass(class)).Configured
		s.pooled[class] = configured > 0
		s.maxWorkers += int(min(configured, uint64(maxInt)-uint64(s.maxWorkers)))
		s.queues[class] = make([]fairQueue, len(classes))
		s.skipped[class] = make([]int, len(classes))
	}
	s.idle.L = &s.mu
	s.dispatcher.Add(1)
	go s.dispatchLoop()
	return s, nil
}

const maxInt = int(^uint(0) >> 1)

// Stats copies the counters.
func (s *Scheduler) Stats() Stats {
	c := &s.stats
	return Stats{Submitted: c.submitted.Value(), Refused: c.refused.Value(), Canceled: c.canceled.Value(),
		Expired: c.expired.Value(), Closed: c.closed.Value(), Started: c.started.Value(), Orphaned: c.orphaned.Value(),
		StartError: c.startError.Value()}
}

// Queued reports the activations waiting in queue class name.
func (s *Scheduler) Queued(name string) int {
	rank, ok := s.queueRank[name]
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued[rank]
}

// Executing reports the activations taken for execution and not yet
// finished.
func (s *Scheduler) Executing() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executing
}

// Drain stops accepting work, lets everything queued run (or expire), and
// waits until nothing is queued or running; then it closes the scheduler.
// Every queued permit has a finite deadline, so Drain ends even when a
// class has no usable cell, unless a Job.Run never returns.
func (s *Scheduler) Drain() {
	s.mu.Lock()
	s.accepting = false
	for !s.closed && (s.executing > 0 || s.totalQueuedLocked() > 0) {
		s.idle.Wait()
	}
	s.mu.Unlock()
	s.Close()
}

// Close stops accepting work, drops everything still queued with
// ErrClosed (releasing its permits), stops the dispatcher and waits for
// every running activation to finish. It does not interrupt running
// activations: cancel their contexts to hurry them. It must not be called
// from Job.Run. Close is idempotent.
func (s *Scheduler) Close() {
	s.mu.Lock()
	first := !s.closed
	var dropped []*item
	if first {
		s.accepting = false
		s.closed = true
		for class := range s.queues {
			for rank := range s.queues[class] {
				q := &s.queues[class][rank]
				for q.length > 0 {
					it := q.first.head
					s.takeLocked(it)
					dropped = append(dropped, it)
				}
			}
		}
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	if first {
		close(s.closing)
		for _, it := range dropped {
			s.unwatch(it)
			s.drop(it, ErrClosed)
		}
	}
	s.dispatcher.Wait()
	s.running.Wait()
	s.watchers.Wait()
	s.workers.Wait()
}

// noCopy makes go vet's copylocks check reject copies of the types that
// hold it.
type noCopy struct{}

// Lock is a no-op used by go vet's copylocks check.
func (*noCopy) Lock() {}

// Unlock is a no-op used by go vet's copylocks check.
func (*noCopy) Unlock() {}

// Workers is how many kept worker goroutines the scheduler runs: one is
// started when a start finds no idle worker, up to one per cell of the
// pool, and each stays until Close. A resource check that counts the
// process's goroutines counts these too.
func (s *Scheduler) Workers() int { return int(s.kept.Load()) }
