package core

import (
	"time"

	"latent.dev/admission/core/atomicledger"
)

// A decision's inputs. Besides its request, a decision judges readings
// of the clock and of the node's load, reads its tenant's fleet slice in
// the commit, and takes a place in the ledger's order. Each reading has
// a label: the step that takes it. By default a decision reads the
// controller's clock and load source, at no cost beyond a nil check per
// reading. [AdmissionController.AdmitWith] hands one decision an
// [Inputs] instead: a recorder's reads the real inputs and keeps each
// reading by its label; a replay's answers each label from a trace. A
// replay is then exact however many times the decision reads a label,
// and a new reading is a new method that every Inputs must answer.
// Steps.go reads through the helpers below and never sees which it is.

// Inputs is where one decision reads its clock and its node's load, and
// what it is told of its fleet slice and its place in the ledger's
// order. Every method is called by the one goroutine deciding, each
// label at most once today, and must not call back into admission. A
// recorder's keeps the last reading of each label, so that a replay's,
// which answers each label the same way however often it is asked,
// gives the decision what it judged.
type Inputs interface {
	// First is the first clock reading: after step 10, judged by steps
	// 11 to 13; the permit's deadline is bound to it.
	First() time.Time
	// Step12Since is step 12's monotonic reading since first, taken only
	// when the load sample was published after first.
	Step12Since(first time.Time) time.Duration
	// CommitSince is the commit's monotonic reading since first, taken
	// in the commit's ledger transaction (step 13).
	CommitSince(first time.Time) time.Duration
	// Step12Load and CommitLoad are the load samples step 12 and the
	// commit judge ([NodeLoadSource.CurrentLoad]).
	Step12Load() (*LoadSample, bool)
	CommitLoad() (*LoadSample, bool)
	// CommitFleet is told what the commit read of a fleet-limited
	// tenant's slice, when the decision reached the fleet check.
	CommitFleet(FleetReading)
	// Placed is told the decision's place in the ledger's total order
	// once it is decided: on a recording provider ([NewRecordingProvider])
	// the commit's transaction's own when the decision reached the
	// commit (committed, whatever its answer), else one drawn when a
	// step before the ledger answered; 0 on any other provider.
	Placed(order uint64, committed bool)
}

// AdmitWith is [AdmissionController.Admit] reading the clock and the
// load through in rather than the controller's clock and load source,
// and telling in of the decision's fleet reading and order. On a
// recording provider a decision made with AdmitWith is never refused by
// the lock-free pre-check: its capacity answer comes from a transaction,
// whose order places it exactly. A nil in is Admit.
func (c *AdmissionController) AdmitWith(req *AdmissionRequest, in Inputs) (*AdmissionPermit, error) {
	return c.admit(req, in)
}

// FleetReading is what a commit read of its tenant's fleet slice (a
// tenant the policy marks fleet-limited), told to [Inputs.CommitFleet].
type FleetReading struct {
	// Published: a slice was published (not withdrawn); Slice is it.
	Published bool
	Slice     int64
	// Remaining is the slice's deadline minus the commit's reading: the
	// slice was usable when it is positive.
	Remaining time.Duration
	// Writes is how many writes the tenant's entry had had when it was
	// read, the one judged being the last (0: none): every
	// PublishFleetSlice of the tenant (a refused one included, since it
	// withdraws) and every WithdrawFleetSlice. A recorder that numbers
	// its fleet lines per tenant the same way lets a replay find the very
	// slice a decision judged, as load samples are found by their
	// sequence.
	Writes uint64
}

// firstNow is the first reading when it is not derived from the base.
func (c *AdmissionController) firstNow(d *decision) time.Time {
	if d.in != nil {
		return d.in.First()
	}
	return c.clock.Now()
}

// step12Since is the monotonic time since the first reading, never
// negative.
func (c *AdmissionController) step12Since(d *decision) time.Duration {
	var e time.Duration
	switch {
	case d.in != nil:
		e = d.in.Step12Since(d.admittedAt)
	case d.derived:
		e = time.Since(c.base) - d.sinceBase
	default:
		e = c.clock.Since(d.admittedAt)
	}
	return max(e, 0)
}

// commitSince is the commit's reading: the monotonic time since the
// first reading, never negative.
func (c *AdmissionController) commitSince(d *decision) time.Duration {
	var e time.Duration
	switch {
	case d.in != nil:
		e = d.in.CommitSince(d.admittedAt)
	case d.derived:
		e = time.Since(c.base) - d.sinceBase
	default:
		e = c.clock.Since(d.admittedAt)
	}
	return max(e, 0)
}

// firstOffset is the first reading as its offset from the controller's
// base: what a permit keeps.
func (c *AdmissionController) firstOffset(d *decision) time.Duration {
	if d.derived {
		return d.sinceBase
	}
	return d.admittedAt.Sub(c.base)
}

// step12Load is step 12's sample; ok is false without a load source,
// or when the source has no usable sample, or hands back nil with true
// (a source's bug, which fails closed).
func (c *AdmissionController) step12Load(d *decision) (s *LoadSample, ok bool) {
	switch {
	case d.in != nil:
		s, ok = d.in.Step12Load()
	case c.load != nil:
		s, ok = c.load.CurrentLoad()
	}
	return s, ok && s != nil
}

// commitLoad is the commit's sample, as step12Load is step 12's.
func (c *AdmissionController) commitLoad(d *decision) (s *LoadSample, ok bool) {
	switch {
	case d.in != nil:
		s, ok = d.in.CommitLoad()
	case c.load != nil:
		s, ok = c.load.CurrentLoad()
	}
	return s, ok && s != nil
}

// commitFleet tells the decision's inputs what the commit read of the
// tenant's slice at now (nanoseconds after the fleet epoch).
func (d *decision) commitFleet(r fleetReading, now int64) {
	if d.in == nil {
		return
	}
	f := FleetReading{Published: r.slice != 0, Writes: r.seq / 2, Remaining: time.Duration(subSaturating(r.until, now))}
	if r.slice != 0 {
		f.Slice = int64(r.slice - 1)
	}
	d.in.CommitFleet(f)
}

// placed tells the decision's inputs its order.
func (d *decision) placed(order uint64, committed bool) {
	if d.in != nil {
		d.in.Placed(order, committed)
	}
}

// preChecked reports whether the lock-free pre-check may answer d: not
// for a decision made with its own inputs on a recording provider, whose
// order must place it where it took effect (only a transaction's does).
func (c *AdmissionController) preChecked(d *decision) bool {
	return d.in == nil || !c.provider.recording
}

// orderOf is tx's order on a recording provider, and 0 on any other.
func (p *LocalQuotaProvider) orderOf(tx atomicledger.Tx) uint64 {
	if !p.recording {
		return 0
	}
	return tx.Order()
}
