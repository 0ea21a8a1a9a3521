package scheduler

import (
	"context"
	"errors"
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
// repeats. Called with mu held.
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
// highest-priority such class. Called with mu held.
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
// waiting has been passed over once more. Called with mu held.
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
	it.job.Run(it.ctx, exec, lease)
}
