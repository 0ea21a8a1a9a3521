package scheduler

import (
	"sync/atomic"
	"time"
)

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
