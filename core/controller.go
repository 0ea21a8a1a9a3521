package core

import (
	"time"

	"latent.dev/admission/core/deadline"
)

// AdmissionController decides admission for one pinned catalog view over
// the provider's shared ledger. It is immutable and safe for concurrent
// use; it starts no goroutine, timer, file or socket.
type AdmissionController struct {
	provider *LocalQuotaProvider
	source   RevisionPolicySource
	records  RecordSource // source, when it keeps records and hands out handles to them
	load     NodeLoadSource
	clock    deadline.Clock
	// system is set when clock is the system clock; base is a reading of
	// it taken when the controller was built (see firstReading).
	system bool
	base   time.Time
	// baseFleet is base as nanoseconds after the provider's fleet epoch.
	baseFleet int64
}

// WithPolicySource returns a controller that resolves revision policy
// through source and shares everything else, the ledger included.
func (c *AdmissionController) WithPolicySource(source RevisionPolicySource) *AdmissionController {
	n := *c
	n.source = source
	if isNilPointer(source) {
		n.source = nil
	}
	n.records, _ = n.source.(RecordSource)
	return &n
}

// Provider returns the provider whose ledger the controller uses.
func (c *AdmissionController) Provider() *LocalQuotaProvider { return c.provider }

// Admit decides req at the current time. The clock is read once,
// after steps 1 to 10 (the request, the policy and the pinned view, none
// of which time can change) and before steps 11 and 12; the deadline is
// bound to that reading. Inside the commit's ledger transaction it is read again,
// monotonically, and the final decision uses the second reading. A
// request rejected by steps 1 to 10 never pays for a clock read.
func (c *AdmissionController) Admit(req *AdmissionRequest) (*AdmissionPermit, error) {
	return c.admit(req, nil)
}

// admit is Admit, reading the clock and load through in when it is not
// nil (inputs.go).
func (c *AdmissionController) admit(req *AdmissionRequest, in Inputs) (*AdmissionPermit, error) {
	if req == nil {
		panic("core: Admit with a nil request")
	}
	d := decision{in: in}
	err := c.checkRequest(req, &d)
	if err == nil {
		err = c.checkPolicy(req, &d)
	}
	if err == nil {
		c.firstReading(req, &d)
		err = c.checkAt(req, &d)
	}
	if err == nil && c.preChecked(&d) {
		err = c.preCheck(&d)
	}
	if err != nil {
		// A rejection before the ledger: counted, and placed in the
		// order when the decision has inputs of its own.
		c.provider.metrics.reject(err)
		if d.in != nil {
			d.placed(c.provider.NextOrder(), false)
		}
		return nil, err.err()
	}
	p, order, err := c.commit(req, &d)
	d.placed(order, true)
	if err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	return p, nil
}

// firstReading is the clock reading that steps 11 to 13 and the permit's
// deadline are judged against.
//
// On the system clock, a request without a caller deadline gets it as
// the controller's base reading plus the monotonic time since
// (time.Since, one monotonic read) rather than from time.Now (a wall and
// a monotonic read, about twice the cost). Its monotonic reading, which
// every comparison between two such readings uses, is exact. Its wall
// reading is the base's wall time plus that elapsed time: Linux slews
// both clocks alike, so the two agree unless the wall clock was stepped
// since the controller was built, and then only the wall form of the
// deadline (Grant().Deadline.UnixMilli, formatting, a comparison with a
// time that carries no monotonic reading) is off by the step. A request
// with a caller deadline (an absolute wall time) is judged against
// time.Now, and so is a load sample whose time carries no monotonic
// reading.
//
// A derived reading is kept as its offset from the base until steps 11
// and 12 have passed (they judge the load sample's age by monotonic
// differences), so a rejection there never builds the time.Time.
func (c *AdmissionController) firstReading(req *AdmissionRequest, d *decision) {
	if d.in == nil && c.derivedReading(req) {
		d.derived, d.sinceBase = true, time.Since(c.base)
		return
	}
	d.admittedAt = c.firstNow(d)
}

// derivedReading reports whether firstReading derives req's reading from
// the base.
func (c *AdmissionController) derivedReading(req *AdmissionRequest) bool {
	return c.system && !req.Deadline.Set
}
