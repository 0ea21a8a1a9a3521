package scheduler

import (
	"context"
	"errors"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Submit takes ownership of permit with its job, in every case: on a nil
// error the activation is queued and the scheduler will either start it
// (Job.Run, then Job.End) or drop it (Job.End with the reason); on an error the permit has been
// released and job is never called. A permit that is not live is refused
// with core.ErrPermitNotLive.
//
// ctx governs the activation, not the caller's wait: cancelling it while
// queued drops the activation, cancelling it while running interrupts
// the guest, whose goroutine still holds the reservation until the guest
// has stopped.
func (s *Scheduler) Submit(ctx context.Context, permit *core.AdmissionPermit, job Job) error {
	if job == nil {
		panic("scheduler: Submit with a nil job")
	}
	// One call answers both whether the permit is live, refused first,
	// and whether its deadline has passed, refused after the checks below.
	unschedulable := permit.EnsureSchedulableAt(s.now())
	if errors.Is(unschedulable, core.ErrPermitNotLive) {
		s.stats.refused.Inc()
		return core.ErrPermitNotLive
	}
	g := permit.Grant() // one copy: it is built field by field from the permit
	o := &g.Obligations
	// The queue class is the one of the policy's classes holding the
	// permit's priority (admission's step 4), found in one index; a permit
	// another policy admitted names another class and is refused.
	rank, ok := s.rankFor(o.Priority)
	err := error(nil)
	switch {
	case !ok || s.queueNames[rank] != o.QueueClass:
		err = ErrUnknownQueueClass
	case int(o.CellClass) >= policy.NumCellClasses || !s.pooled[o.CellClass]:
		err = ErrCellClassNotPooled
	case ctx.Err() != nil:
		err = ErrCanceled
	case unschedulable != nil:
		err = ErrExpired
	}
	if err != nil {
		return s.refuse(permit, err)
	}
	// The activation's context ends at the permit's deadline, so one
	// callback covers both queued cancellation and queued expiry, and the
	// runner sees the same deadline.
	runCtx, cancel := context.WithDeadlineCause(ctx, g.Deadline, ErrExpired)
	it := &item{permit: permit, job: job, grant: g, ctx: runCtx, cancel: cancel, tenant: g.Revision.Tenant, cell: o.CellClass, queue: rank}

	s.mu.Lock()
	switch {
	case !s.accepting:
		err = ErrClosed
	case s.queued[rank] >= s.bounds[rank]:
		err = ErrQueueFull
	}
	if err != nil {
		s.mu.Unlock()
		cancel()
		return s.refuse(permit, err)
	}
	it.queuedAt = s.now()
	weight := uint64(1)
	if w, ok := s.weights[it.tenant]; ok {
		weight = uint64(w)
	}
	s.queues[it.cell][rank].push(it, weight)
	s.queued[rank]++
	s.waiting[it.cell]++
	// Registered under mu so the callback cannot find the item half-queued;
	// it runs on its own goroutine, so it cannot deadlock on mu here.
	s.watchers.Add(1)
	it.stopWatch = context.AfterFunc(runCtx, func() { s.dropQueued(it) })
	s.stats.submitted.Inc() // before the dispatcher can count it started
	s.mu.Unlock()

	select {
	case s.kick <- struct{}{}:
	default:
	}
	return nil
}

func (s *Scheduler) refuse(permit *core.AdmissionPermit, err error) error {
	permit.Release()
	s.stats.refused.Inc()
	return err
}

// rankFor is the rank of the queue class holding priority.
func (s *Scheduler) rankFor(priority uint32) (int, bool) {
	if uint64(priority) >= uint64(len(s.rankOf)) || s.rankOf[priority] < 0 {
		return 0, false
	}
	return int(s.rankOf[priority]), true
}

// now is the scheduler's clock: Options.Clock, or time.Now when it is
// nil, read directly rather than through a deadline.System.
func (s *Scheduler) now() time.Time {
	if s.clock == nil {
		return time.Now()
	}
	return s.clock.Now()
}

// dropQueued is the queued-cancellation callback: it runs when the
// activation's context ends and drops the item if it is still queued.
func (s *Scheduler) dropQueued(it *item) {
	defer s.watchers.Done()
	s.mu.Lock()
	if it.state != itemQueued {
		s.mu.Unlock()
		return
	}
	s.takeLocked(it)
	s.mu.Unlock()
	err := ErrCanceled
	if errors.Is(context.Cause(it.ctx), ErrExpired) {
		err = ErrExpired
	}
	s.drop(it, err)
}

// takeLocked removes a queued item without serving it. Called with s.mu
// held.
func (s *Scheduler) takeLocked(it *item) {
	q := &s.queues[it.cell][it.queue]
	q.remove(it)
	s.dequeuedLocked(it, q)
}

// dequeuedLocked accounts for it leaving q, served or not. Called with
// s.mu held.
func (s *Scheduler) dequeuedLocked(it *item, q *fairQueue) {
	it.state = itemTaken
	s.queued[it.queue]--
	s.waiting[it.cell]--
	if q.length == 0 {
		s.skipped[it.cell][it.queue] = 0
	}
	s.signalIdleLocked()
}

// signalIdleLocked wakes Drain once nothing is queued or executing.
// Called with s.mu held.
func (s *Scheduler) signalIdleLocked() {
	if s.executing == 0 && s.totalQueuedLocked() == 0 {
		s.idle.Broadcast()
	}
}

// totalQueuedLocked is the items queued across ranks. Called with s.mu
// held.
func (s *Scheduler) totalQueuedLocked() int {
	n := 0
	for _, q := range s.queued {
		n += q
	}
	return n
}

// drop ends a taken item that will never run: the permit is released
// before the job hears of it, so a caller woken by End sees the
// reservation already returned.
func (s *Scheduler) drop(it *item, err error) {
	it.permit.Release()
	it.cancel()
	switch err {
	case ErrCanceled:
		s.stats.canceled.Inc()
	case ErrExpired:
		s.stats.expired.Inc()
	case ErrClosed:
		s.stats.closed.Inc()
	}
	it.job.End(err)
}

// unwatch unregisters the queued-cancellation callback of a taken item.
// If the callback already started, it finds the item taken and only
// signs off.
func (s *Scheduler) unwatch(it *item) {
	if it.stopWatch() {
		s.watchers.Done()
	}
}

// itemState is where a queued item is; guarded by Scheduler.mu.
type itemState uint8

const (
	itemQueued itemState = iota
	// itemTaken: removed from the queue by the dispatcher, a drop or Close;
	// whoever took it owns the permit now.
	itemTaken
)

// item is one submitted activation. The fields before state never change
// after Submit; the rest are guarded by Scheduler.mu.
type item struct {
	permit *core.AdmissionPermit
	job    Job
	// grant is the permit's grant, taken once at Submit and handed to
	// Job.Run by pointer: the job never rebuilds it from the permit.
	grant core.Grant
	// ctx is the caller's context bounded by the permit's deadline; the
	// job runs under it, so running cancellation and the deadline reach
	// the backend through one channel.
	ctx    context.Context
	cancel context.CancelFunc
	// stopWatch unregisters the queued-cancellation callback.
	stopWatch func() bool
	tenant    string
	cell      policy.CellClass
	queue     int // queue class rank, 0 the highest priority
	// queuedAt is the scheduler's clock when the item joined its queue,
	// read under Scheduler.mu, so within a flow it never decreases from
	// head to tail.
	queuedAt time.Time

	state      itemState
	flow       *flow
	prev, next *item
}

// flow is one tenant's FIFO within one fair queue. A flow exists only
// while it holds items, so the flows of a queue are bounded by its items,
// never by the tenants that ever submitted. Guarded by Scheduler.mu, as
// its queue is.
type flow struct {
	tenant string
	// quantum is the tenant's weight: the activations it may dispatch per
	// round.
	quantum uint64
	// deficit is what is left of this round's quantum; zero at the front
	// of the round means the flow's turn has not started.
	deficit    uint64
	head, tail *item
	length     int
	prev, next *flow
}

// fairQueue is one (cell class, queue class) queue: deficit round robin
// across tenant flows with unit cost per activation. A flow at the front
// of the round dispatches up to its quantum, then moves to the back, so
// over any interval in which two flows stay backlogged their dispatches
// differ by at most one round's quanta, whatever either submits.
// Guarded by Scheduler.mu: every method is called with it held.
type fairQueue struct {
	flows       map[string]*flow
	first, last *flow // the round, in turn order; every flow has items
	length      int
}

func (q *fairQueue) push(it *item, weight uint64) {
	f := q.flows[it.tenant]
	if f == nil {
		if q.flows == nil {
			q.flows = make(map[string]*flow)
		}
		f = &flow{tenant: it.tenant, quantum: weight}
		q.flows[it.tenant] = f
		q.appendFlow(f)
	}
	it.flow = f
	it.prev = f.tail
	if f.tail != nil {
		f.tail.next = it
	} else {
		f.head = it
	}
	f.tail = it
	f.length++
	q.length++
}

// front returns the item DRR dispatches next, starting the front flow's
// turn if it has not started. It removes nothing.
func (q *fairQueue) front() *item {
	f := q.first
	if f == nil {
		return nil
	}
	if f.deficit == 0 {
		f.deficit = f.quantum
	}
	return f.head
}

// serve removes the item front returned and charges its flow one unit.
func (q *fairQueue) serve(it *item) {
	f := it.flow
	q.unlink(it)
	f.deficit--
	switch {
	case f.length == 0:
		q.dropFlow(f)
	case f.deficit == 0:
		// Turn over: to the back of the round, with a fresh quantum when
		// it reaches the front again.
		q.unlinkFlow(f)
		q.appendFlow(f)
	}
}

// remove takes an item out of the queue without charging its flow: a
// dropped activation received no service.
func (q *fairQueue) remove(it *item) {
	f := it.flow
	q.unlink(it)
	if f.length == 0 {
		q.dropFlow(f)
	}
}

func (q *fairQueue) unlink(it *item) {
	f := it.flow
	if it.prev != nil {
		it.prev.next = it.next
	} else {
		f.head = it.next
	}
	if it.next != nil {
		it.next.prev = it.prev
	} else {
		f.tail = it.prev
	}
	it.prev, it.next, it.flow = nil, nil, nil
	f.length--
	q.length--
}

func (q *fairQueue) dropFlow(f *flow) {
	q.unlinkFlow(f)
	delete(q.flows, f.tenant)
}

func (q *fairQueue) appendFlow(f *flow) {
	f.prev, f.next = q.last, nil
	if q.last != nil {
		q.last.next = f
	} else {
		q.first = f
	}
	q.last = f
}

func (q *fairQueue) unlinkFlow(f *flow) {
	if f.prev != nil {
		f.prev.next = f.next
	} else {
		q.first = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else {
		q.last = f.prev
	}
	f.prev, f.next = nil, nil
}

// OldestWait reports, per cell class, how long the oldest activation now
// queued for that class has waited at now (0 when none waits, or when
// now precedes its arrival). It is the observed queue delay the node's
// load sampler publishes. It takes mu once and allocates nothing; its
// cost grows with the tenants that have work queued, not with the queued
// activations, because a flow's head is its oldest item.
func (s *Scheduler) OldestWait(now time.Time) [policy.NumCellClasses]time.Duration {
	var out [policy.NumCellClasses]time.Duration
	s.mu.Lock()
	defer s.mu.Unlock()
	for class := range s.queues {
		if s.waiting[class] == 0 {
			continue
		}
		var oldest time.Time
		found := false
		for rank := range s.queues[class] {
			for f := s.queues[class][rank].first; f != nil; f = f.next {
				if t := f.head.queuedAt; !found || t.Before(oldest) {
					oldest, found = t, true
				}
			}
		}
		if found {
			out[class] = max(now.Sub(oldest), 0)
		}
	}
	return out
}
