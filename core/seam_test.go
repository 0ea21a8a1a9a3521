package core

import "time"

// The tests' deterministic seam. Production has one entry point per
// operation, each reading the injected clock; these drive that same path
// with a clock stopped at a chosen time, so a test can say "at t" without
// the package exporting a second entry point.

// stoppedClock reads the same time forever.
type stoppedClock struct{ now time.Time }

func (c stoppedClock) Now() time.Time                  { return c.now }
func (c stoppedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// AdmitAt is Admit on a clock stopped at now. The permit it returns
// reads the controller's own clock afterwards, as one from Admit does.
func (c *AdmissionController) AdmitAt(req *AdmissionRequest, now time.Time) (*AdmissionPermit, error) {
	at := *c
	at.clock, at.system = stoppedClock{now}, false
	p, err := at.Admit(req)
	if p != nil {
		p.state().ctl = c
	}
	return p, err
}

// StartExecutionAt is StartExecution with the permit's clock stopped at
// now. It changes the permit's clock for good, which only a test may do.
func (p *AdmissionPermit) StartExecutionAt(now time.Time) (*ExecutionPermit, error) {
	if s := p.state(); s != nil && s.ctl.clock != (stoppedClock{now}) {
		at := *s.ctl
		at.clock, at.system = stoppedClock{now}, false
		s.ctl = &at
	}
	return p.StartExecution()
}
