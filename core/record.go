package core

import (
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// Recording. A node that records its decisions, so that a tool can
// replay them against another policy (docs/record-and-shadow.md), needs
// from admission what the request does not carry: where each decision
// and each later move of the ledger took effect in one total order, the
// clock readings a decision judged, and the load samples it saw. A
// recording provider gives all three; the recording itself (a file, a
// buffer, a goroutine) is the caller's.

// Journal is told of the ledger's moves after admission: starts and
// releases, the leaked permits' reclaims included. It is called once the
// move's transaction has ended, outside every lock, from the goroutine
// that made the move (a reclaim's is the finalizer goroutine), so calls
// can arrive out of order; [LedgerMove.Order] is the order they took
// effect in. It must not block, and must not call back into admission.
type Journal interface {
	Moved(LedgerMove)
}

// MoveKind is what a [LedgerMove] did.
type MoveKind uint8

// The moves a journal is told of.
const (
	// MoveStarted: StartExecution returned the queued slot.
	MoveStarted MoveKind = iota + 1
	// MoveStartRefused: StartExecution found the deadline passed and
	// released everything.
	MoveStartRefused
	// MoveReleased: a permit's Release returned what it held.
	MoveReleased
	// MoveReclaimed: a leaked permit's reservation was reclaimed.
	MoveReclaimed
)

// LedgerMove is one move of a recording provider's ledger.
type LedgerMove struct {
	Kind MoveKind
	// Order is the move's place in the ledger's total order; Admission
	// is the order of the commit that admitted the permit.
	Order, Admission uint64
	// Elapsed is the monotonic time from the admission's clock reading
	// (the one its deadline is bound to) to the move.
	Elapsed time.Duration
}

// DecisionRecord is what one decision depended on besides its request,
// filled in by [AdmissionController.AdmitRecorded].
type DecisionRecord struct {
	// Order is the decision's place in the ledger's total order: the
	// commit's own, or for a decision made before the ledger one drawn
	// when it was made. It is 0 on a provider that does not record.
	Order uint64
	// First is the clock reading steps 11 and 12 judged and the deadline
	// is bound to; the zero time when steps 1 to 10 decided.
	First time.Time
	// Since holds the monotonic readings taken after First, in order
	// (step 12's, when a sample was published after First, then the
	// commit's); Reads says how many there are.
	Since [2]time.Duration
	Reads int
	// Load is the sample step 12 judged and CommitLoad the one the
	// commit judged; nil when there was none, or the step was not reached.
	Load, CommitLoad *LoadSample
	// Fleet is the fleet slice the commit judged, for a fleet-limited
	// tenant's decision that reached the fleet check.
	Fleet FleetReading
	// Committed: the decision reached the commit (step 13), whose answer
	// it is.
	Committed bool
}

// since reads the monotonic time since first on c's clock, and records
// it when the decision is recorded.
func (c *AdmissionController) since(d *decision, first time.Time) time.Duration {
	e := c.clock.Since(first)
	if r := d.rec; r != nil && r.Reads < len(r.Since) {
		r.Since[r.Reads] = e
		r.Reads++
	}
	return max(e, 0)
}

// NewRecordingProvider is [NewLocalQuotaProvider] for a node that records
// its decisions. Its ledger is the same one: every ledger transaction
// takes the next place in one total order under the ledger's mutex
// ([atomicledger.Tx.Order]), so recording adds no mode of its own. What
// a recording provider adds is that it reports those orders (in a
// [DecisionRecord] and a [LedgerMove]), that a decision recorded with
// [AdmissionController.AdmitRecorded] is never refused by the lock-free
// pre-check (its capacity answer comes from a transaction, whose order
// places it exactly), and that journal is told of every start and
// release.
func NewRecordingProvider(p *policy.NodeAdmissionPolicy, journal Journal) (*LocalQuotaProvider, error) {
	compiled, err := policy.Compile(p)
	if err != nil {
		return nil, err
	}
	if isNilPointer(journal) {
		journal = nil
	}
	pr := newProvider(compiled)
	pr.recording, pr.journal = true, journal
	return pr, nil
}

// NextOrder draws the next place in a recording provider's total order,
// for an event admission does not order itself: a decision an adapter
// made before asking admission, a load sample, a catalog change. It is 0
// on a provider that does not record.
func (p *LocalQuotaProvider) NextOrder() uint64 {
	if !p.recording {
		return 0
	}
	return p.ledger.NextOrder()
}

// orderOf is tx's order on a recording provider, and 0 on any other.
func (p *LocalQuotaProvider) orderOf(tx atomicledger.Tx) uint64 {
	if !p.recording {
		return 0
	}
	return tx.Order()
}

// AdmitRecorded is [AdmissionController.Admit], and fills rec with what
// the decision depended on besides req. On a recording provider it takes
// every clock reading from the controller's clock (no reading is derived
// from the controller's base), so that rec holds each one.
func (c *AdmissionController) AdmitRecorded(req *AdmissionRequest, rec *DecisionRecord) (*AdmissionPermit, error) {
	if rec == nil {
		panic("core: AdmitRecorded with a nil record")
	}
	*rec = DecisionRecord{}
	return c.admit(req, rec)
}

// journalMove tells the provider's journal of a move, if it has one.
func (s *permitState) journalMove(kind MoveKind, order uint64, elapsed time.Duration) {
	if j := s.provider().journal; j != nil {
		j.Moved(LedgerMove{Kind: kind, Order: order, Admission: s.order, Elapsed: elapsed})
	}
}
