package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/policy"
)

// dispatchLoop is the scheduler's one dispatcher. It sleeps until work
// arrives or a cell frees up; it never polls.
func (s *Scheduler) dispatchLoop() {
	defer s.dispatcher.Done()
	for {
		// Taken before looking, so a release in between wakes us.
		changed := s.pool.Changed()
		for s.dispatchOne() {
		}
		select {
		case <-s.kick:
		case <-changed:
		case <-s.closing:
			return
		}
	}
}

// dispatchOne starts at most one activation. It reports whether it made
// progress (started or dropped something), so the loop looks again.
func (s *Scheduler) dispatchOne() bool {
	var dropped []droppedItem
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	it, lease := s.nextLocked(&dropped)
	s.mu.Unlock()
	for _, d := range dropped {
		s.unwatch(d.item)
		s.drop(d.item, d.err)
	}
	if it == nil {
		return len(dropped) > 0
	}
	s.unwatch(it)
	s.start(it, lease)
	return true
}

type droppedItem struct {
	item *item
	err  error
}

// nextLocked picks the next activation that can run now and leases its
// cell. For each cell class with a free cell it picks the queue class
// (priority with a starvation bound), then the tenant (DRR), then checks
// the head activation's cancellation and deadline immediately before
// allocating the cell; a dead one is taken out for dropping and the pick
// repeats. Called with s.mu held.
func (s *Scheduler) nextLocked(dropped *[]droppedItem) (*item, *cellpool.Lease) {
	for class := range policy.NumCellClasses {
		cell := policy.CellClass(class)
		for s.waiting[class] > 0 && s.pool.Free(cell) > 0 {
			rank := s.pickRankLocked(class)
			q := &s.queues[class][rank]
			it := q.front()
			now := s.now()
			if err := schedulable(it, now); err != nil {
				s.takeLocked(it)
				*dropped = append(*dropped, droppedItem{it, err})
				continue
			}
			lease, err := s.pool.Acquire(cell)
			if err != nil {
				// Someone else took the cell (or the pool closed): wait for
				// the next change.
				break
			}
			q.serve(it)
			s.waits[rank].observe(now.Sub(it.queuedAt))
			s.dequeuedLocked(it, q)
			s.servedLocked(class, rank)
			s.executing++
			return it, lease
		}
	}
	return nil, nil
}

// schedulable is the check immediately before cell allocation.
func schedulable(it *item, now time.Time) error {
	if it.ctx.Err() != nil {
		if errors.Is(context.Cause(it.ctx), ErrExpired) {
			return ErrExpired
		}
		return ErrCanceled
	}
	if err := it.permit.EnsureSchedulableAt(now); err != nil {
		return ErrExpired
	}
	return nil
}

// pickRankLocked chooses the queue class to serve for a cell class: the
// highest-priority class with work, unless a lower class with work has
// waited through StarvationBound dispatches of higher classes; then the
// highest-priority such class. Called with s.mu held.
func (s *Scheduler) pickRankLocked(class int) int {
	first := -1
	for rank := range s.queues[class] {
		if s.queues[class][rank].length == 0 {
			continue
		}
		if first < 0 {
			first = rank
			continue
		}
		if s.skipped[class][rank] >= s.starvation {
			return rank
		}
	}
	return first
}

// servedLocked records a dispatch from rank: every lower class that is
// waiting has been passed over once more. Called with s.mu held.
func (s *Scheduler) servedLocked(class, rank int) {
	s.skipped[class][rank] = 0
	for lower := rank + 1; lower < len(s.queues[class]); lower++ {
		if s.queues[class][lower].length > 0 {
			s.skipped[class][lower]++
		}
	}
}

// start consumes the permit on the leased cell and hands both to the job
// on a worker goroutine that owns them until the job is done.
func (s *Scheduler) start(it *item, lease *cellpool.Lease) {
	exec, err := it.permit.StartExecution()
	if err != nil {
		// The permit is released; the cell was never used, so it goes
		// back clean.
		lease.Release()
		it.cancel()
		var ce core.Error
		if errors.As(err, &ce) && ce.Code() == core.CodeDeadlineExceeded {
			err = ErrExpired
			s.stats.expired.Inc()
		} else {
			err = ErrStartFailed
			s.stats.startError.Inc()
		}
		it.job.End(err)
		s.finished()
		return
	}
	s.stats.started.Inc()
	s.running.Add(1)
	s.hand(startedItem{it: it, exec: exec, lease: lease})
}

// startedItem is a started activation on its way to a worker.
type startedItem struct {
	it    *item
	exec  *core.ExecutionPermit
	lease *cellpool.Lease
}

// hand gives w to an idle worker, or to a new one while there are fewer
// workers than cells. With as many workers as cells it waits for one:
// w holds a cell, so some worker has finished its activation's run and
// only ends it (the permit's release and Job.End), which never waits on
// the dispatcher. Once Close has begun the workers leave, and w runs on
// a goroutine of its own. A worker keeps its goroutine, and the stack the
// guest grew it to, for the next activation, so a start spawns no
// goroutine once the workers are there.
func (s *Scheduler) hand(w startedItem) {
	select {
	case s.handoff <- w:
		return
	default:
	}
	if s.workerCount < s.maxWorkers {
		s.workerCount++
		s.kept.Add(1)
		s.workers.Add(1)
		go s.worker(w)
		return
	}
	select {
	case s.handoff <- w:
	case <-s.closing:
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			s.execute(w.it, w.exec, w.lease)
		}()
	}
}

// worker runs started activations, one at a time, until Close.
func (s *Scheduler) worker(w startedItem) {
	defer s.workers.Done()
	defer s.kept.Add(-1)
	for {
		s.execute(w.it, w.exec, w.lease)
		select {
		case w = <-s.handoff:
		case <-s.closing:
			return
		}
	}
}

// execute runs the job, then releases the execution permit, its one
// release: a lease the job left held is quarantined first (the cell's
// state is unknown), so capacity never returns while a cell might still
// be in use; only then is the job told it ended.
func (s *Scheduler) execute(it *item, exec *core.ExecutionPermit, lease *cellpool.Lease) {
	defer s.running.Done()
	defer s.finished()
	defer it.cancel()
	s.run(it, exec, lease)
	it.job.End(nil)
}

// run calls the job and releases exec after it, even if the job panics.
func (s *Scheduler) run(it *item, exec *core.ExecutionPermit, lease *cellpool.Lease) {
	defer func() {
		if lease.Quarantine() {
			s.stats.orphaned.Inc()
		}
		exec.Release()
	}()
	it.job.Run(it.ctx, &it.grant, lease)
}

// finished is called when a taken item's execution is over, whether it
// ran or failed to start.
func (s *Scheduler) finished() {
	s.mu.Lock()
	s.executing--
	s.signalIdleLocked()
	s.mu.Unlock()
}

// queueWaitBounds are the upper bounds, inclusive and ascending, of the
// queue-wait histogram's buckets; a wait above the last falls in the
// implicit +Inf bucket. They span a dispatch that found a free cell at
// once to a wait as long as the largest wall-time grant.
var queueWaitBounds = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second,
}

// QueueWaitBounds returns the upper bounds of the queue-wait histogram's
// buckets, ascending; every queue class uses the same ones.
func QueueWaitBounds() []time.Duration {
	return append([]time.Duration(nil), queueWaitBounds[:]...)
}

// waitHistogram is one queue class's histogram of queue waits: a fixed
// array of atomic bucket counts (not cumulative; the last is +Inf) and the
// sum. It is recorded without locks or allocation and read at any time.
type waitHistogram struct {
	buckets [len(queueWaitBounds) + 1]atomic.Uint64
	sumNs   atomic.Int64
}

// observe records one wait; a negative wait (the clock stepped back)
// counts as zero.
func (h *waitHistogram) observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(queueWaitBounds) && d > queueWaitBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNs.Add(int64(d))
}

// QueueWaitHistogram is one queue class's histogram of the time its
// activations waited, from joining the queue (Submit) to being taken off
// it onto a leased cell by the dispatcher. Activations dropped from the
// queue (cancelled, expired, closed) are not in it.
type QueueWaitHistogram struct {
	// QueueClass is the queue class's configured name.
	QueueClass string
	// Bounds are the buckets' inclusive upper bounds, ascending (see
	// QueueWaitBounds); the +Inf bucket is implicit.
	Bounds []time.Duration
	// Cumulative[i] is the number of waits at most Bounds[i].
	Cumulative []uint64
	// Count is the number of waits, the +Inf bucket's cumulative count.
	Count uint64
	// Sum is the total of the waits.
	Sum time.Duration
}

// snapshot reads the histogram. The buckets are read one by one, so a
// wait recorded meanwhile may be in some and not others, but Count is the
// sum of the buckets read, so Cumulative never exceeds it; Sum may be a
// wait ahead of or behind them.
func (h *waitHistogram) snapshot(name string) QueueWaitHistogram {
	out := QueueWaitHistogram{QueueClass: name, Bounds: QueueWaitBounds(), Cumulative: make([]uint64, len(queueWaitBounds))}
	for i := range h.buckets {
		out.Count += h.buckets[i].Load()
		if i < len(out.Cumulative) {
			out.Cumulative[i] = out.Count
		}
	}
	out.Sum = time.Duration(h.sumNs.Load())
	return out
}

// QueueWaits returns a histogram of queue waits per configured queue
// class, highest priority first. A wait is recorded when the dispatcher
// takes an activation off its queue onto a cell, measured on the
// scheduler's clock from Submit; recording it costs a few atomic adds
// and no allocation, and the histograms' memory is fixed when New builds
// the scheduler (one per queue class). QueueWaits takes no lock.
func (s *Scheduler) QueueWaits() []QueueWaitHistogram {
	out := make([]QueueWaitHistogram, len(s.waits))
	for rank := range s.waits {
		out[rank] = s.waits[rank].snapshot(s.queueNames[rank])
	}
	return out
}
