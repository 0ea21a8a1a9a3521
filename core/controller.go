package core

import (
	"latent.dev/admission/core/deadline"
)

// AdmissionController decides admission for one pinned catalog view over
// the provider's shared ledger. It is immutable and safe for concurrent
// use; it starts no goroutine, timer, file or socket.
type AdmissionController struct {
	provider *LocalQuotaProvider
	source   RevisionPolicySource
	vouched  ValidatedRevisionSource // source, when it vouches for its identities
	load     NodeLoadSource
	clock    deadline.Clock
}

// WithPolicySource returns a controller that resolves revision policy
// through source and shares everything else, the ledger included.
func (c *AdmissionController) WithPolicySource(source RevisionPolicySource) *AdmissionController {
	n := *c
	n.source = source
	if isNilPointer(source) {
		n.source = nil
	}
	n.vouched, _ = n.source.(ValidatedRevisionSource)
	return &n
}

// Provider returns the provider whose ledger the controller uses.
func (c *AdmissionController) Provider() *LocalQuotaProvider { return c.provider }

// AdmitNow decides req at the current time. The clock is read once,
// after steps 1 to 10 (the request, the policy and the pinned view, none
// of which time can change) and before steps 11 and 12; the deadline is
// bound to that reading. Under the ledger mutex it is read again,
// monotonically, and the final decision uses the second reading. A
// request rejected by steps 1 to 10 never pays for a clock read.
func (c *AdmissionController) AdmitNow(req *AdmissionRequest) (*AdmissionPermit, error) {
	if req == nil {
		panic("core: AdmitNow with a nil request")
	}
	var d decision
	err := c.checkRequest(req, &d)
	if err == nil {
		err = c.checkPolicy(req, &d)
	}
	if err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	now := c.clock.Now()
	if err := c.checkAt(req, now, &d); err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	p, err := c.commit(req, now, &d)
	if err != nil {
		c.provider.metrics.reject(err)
		return nil, err.err()
	}
	c.provider.metrics.inc(admittedCounter)
	return p, nil
}
