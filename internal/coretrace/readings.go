package coretrace

import (
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/core/deadline"
	"latent.dev/admission/internal/trace"
)

// Recording is one decision's [core.Inputs] on a recording node: it
// reads Clock and Load, the ones the node's controllers read, and keeps
// each reading by its label (the last, were a label read twice). Its
// zero readings are a decision that read nothing; [Recording.Reset]
// makes a used one so again.
type Recording struct {
	Clock deadline.Clock
	Load  core.NodeLoadSource

	first            time.Time // zero: the decision read no clock
	step12, commit   time.Duration
	hasStep12        bool
	load, commitLoad *core.LoadSample
	fleet            core.FleetReading
	hasFleet         bool
	order            uint64
	placed           bool
	committed        bool

	// What Put points the line at, so that a recorder that keeps the
	// Recording with the line allocates nothing for it.
	since     [2]int64
	fleetLine trace.FleetReading
}

var _ core.Inputs = (*Recording)(nil)

// Reset forgets every reading, and reads clock and load from now on.
func (r *Recording) Reset(clock deadline.Clock, load core.NodeLoadSource) {
	*r = Recording{Clock: clock, Load: load}
}

// First reads the clock.
func (r *Recording) First() time.Time {
	r.first = r.Clock.Now()
	return r.first
}

// Step12Since reads the monotonic time since first, for step 12.
func (r *Recording) Step12Since(first time.Time) time.Duration {
	r.step12, r.hasStep12 = r.Clock.Since(first), true
	return r.step12
}

// CommitSince reads the monotonic time since first, for the commit.
func (r *Recording) CommitSince(first time.Time) time.Duration {
	r.commit = r.Clock.Since(first)
	return r.commit
}

// Step12Load reads the load sample for step 12.
func (r *Recording) Step12Load() (*core.LoadSample, bool) {
	s, ok := r.current()
	r.load = s
	return s, ok
}

// CommitLoad reads the load sample for the commit.
func (r *Recording) CommitLoad() (*core.LoadSample, bool) {
	s, ok := r.current()
	r.commitLoad = s
	return s, ok
}

// current is Load's sample; nil unless it is usable.
func (r *Recording) current() (*core.LoadSample, bool) {
	if r.Load == nil {
		return nil, false
	}
	s, ok := r.Load.CurrentLoad()
	if !ok || s == nil {
		return nil, false
	}
	return s, true
}

// CommitFleet keeps the fleet slice the commit judged.
func (r *Recording) CommitFleet(f core.FleetReading) { r.fleet, r.hasFleet = f, true }

// Placed keeps the decision's order.
func (r *Recording) Placed(order uint64, committed bool) {
	r.order, r.committed, r.placed = order, committed, true
}

// Put writes what the decision read into its line d, pointing d at
// storage of r's own: its clock readings, samples, fleet slice and
// whether it committed. order is the line's Order; t its T (the first
// reading's time since start) when clock is true, and the caller's own
// time of the line otherwise.
func (r *Recording) Put(d *trace.Decision, start time.Time) (order uint64, t int64, clock bool) {
	if !r.first.IsZero() {
		t, clock = int64(r.first.Sub(start)), true
	}
	d.Clock, d.Committed = clock, r.committed
	n := 0
	if r.hasStep12 {
		r.since[n] = int64(r.step12)
		n++
	}
	if r.committed {
		r.since[n] = int64(r.commit)
		n++
	}
	d.Since = nil
	if n > 0 {
		d.Since = r.since[:n]
	}
	d.LoadSequence, d.CommitLoadSequence = 0, 0
	if r.load != nil {
		d.LoadSequence = r.load.Sequence
	}
	if r.committed && r.commitLoad != nil {
		d.CommitLoadSequence = r.commitLoad.Sequence
	}
	d.Fleet = nil
	if r.hasFleet {
		f := r.fleet
		r.fleetLine = trace.FleetReading{Published: f.Published, Slice: f.Slice, RemainingNS: int64(f.Remaining), Writes: f.Writes}
		d.Fleet = &r.fleetLine
	}
	return r.order, t, clock
}

// Samples is where a replay finds the samples a line names.
type Samples interface {
	// BySequence is the recorded sample seq (seq 0: none).
	BySequence(seq uint64) (*core.LoadSample, bool)
	// Latest is the latest sample handed out in order, for a decision
	// that did not reach step 12 when it was recorded.
	Latest() (*core.LoadSample, bool)
}

// Replaying is one decision's [core.Inputs] in a replay: each label
// answers the reading its line recorded, however many times it is
// asked. A label the recorded decision did not reach (the candidate
// policy let it further) answers the latest reading before it: step
// 12's clock reading or none (0), and step 12's sample.
type Replaying struct {
	first                time.Time
	step12, commit       time.Duration
	load, commitLoad     *core.LoadSample
	loadOK, commitLoadOK bool
}

var _ core.Inputs = (*Replaying)(nil)

// Set makes r answer decision d, whose T is first, its samples from s.
func (r *Replaying) Set(d *trace.Decision, first time.Time, s Samples) {
	*r = Replaying{first: first}
	since := d.Since
	if d.Committed && len(since) > 0 {
		r.commit = time.Duration(since[len(since)-1])
		since = since[:len(since)-1]
	}
	if len(since) > 0 {
		r.step12 = time.Duration(since[0])
	}
	if !d.Committed {
		r.commit = r.step12
	}
	if d.Clock {
		r.load, r.loadOK = s.BySequence(d.LoadSequence)
	} else {
		r.load, r.loadOK = s.Latest()
	}
	r.commitLoad, r.commitLoadOK = r.load, r.loadOK
	if d.Committed {
		r.commitLoad, r.commitLoadOK = s.BySequence(d.CommitLoadSequence)
	}
}

// First answers the line's T.
func (r *Replaying) First() time.Time { return r.first }

// Step12Since answers step 12's recorded reading.
func (r *Replaying) Step12Since(time.Time) time.Duration { return r.step12 }

// CommitSince answers the commit's recorded reading.
func (r *Replaying) CommitSince(time.Time) time.Duration { return r.commit }

// Step12Load answers step 12's recorded sample.
func (r *Replaying) Step12Load() (*core.LoadSample, bool) { return r.load, r.loadOK }

// CommitLoad answers the commit's recorded sample.
func (r *Replaying) CommitLoad() (*core.LoadSample, bool) { return r.commitLoad, r.commitLoadOK }

// CommitFleet ignores the reading: a replay puts the recorded slice in
// force before the decision (the line's Fleet.Writes names it).
func (r *Replaying) CommitFleet(core.FleetReading) {}

// Placed ignores the candidate's order: the replay keeps the line's.
func (r *Replaying) Placed(uint64, bool) {}
