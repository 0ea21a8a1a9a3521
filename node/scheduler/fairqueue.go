package scheduler

import (
	"context"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

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
// never by the tenants that ever submitted.
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
