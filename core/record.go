package core

import (
	"time"

	"latent.dev/admission/policy"
)

// Recording. A node that records its decisions, so that a tool can
// replay them against another policy (docs/record-and-shadow.md), needs
// from admission what the request does not carry: where each decision
// and each later move of the ledger took effect in one total order, and
// what each decision read of its clock and load. A decision's readings
// reach the recorder through its [Inputs] (inputs.go); a recording
// provider gives the orders and tells a [Journal] of the moves; the
// recording itself (a file, a buffer, a goroutine) is the caller's.

// Journal is told of the ledger's moves after admission: starts and
// releases, the leaked permits' reclaims included. It is called once the
// move's transaction has ended, outside every lock, from the goroutine
// that made the move (a reclaim's is the finalizer goroutine), so calls
// can arrive out of order; [LedgerMove.Order] is the order they took
// effect in. It must not block, and must not call back into admission.
type Journal interface {
	Moved(LedgerMove)
}

// LedgerMove is one move of a recording provider's ledger: a start
// (StartExecution returned the queued slot, or, Refused, found the
// deadline passed and released everything) or a release (a permit's
// Release returned what it held, or, Reclaimed, a leaked permit's
// reservation was reclaimed).
type LedgerMove struct {
	// Order is the move's place in the ledger's total order; Admission
	// is the order of the commit that admitted the permit.
	Order, Admission uint64
	// Elapsed is the monotonic time from the admission's clock reading
	// (the one its deadline is bound to) to the move.
	Elapsed                     time.Duration
	Started, Refused, Reclaimed bool
}

// moveKind is which move a journal is told of.
type moveKind uint8

const (
	moveStarted moveKind = iota + 1
	moveStartRefused
	moveReleased
	moveReclaimed
)

// NewRecordingProvider is [NewLocalQuotaProvider] for a node that records
// its decisions. Its ledger is the same one: every ledger transaction
// takes the next place in one total order under the ledger's mutex
// ([atomicledger.Tx.Order]), so recording adds no mode of its own. What
// a recording provider adds is that it reports those orders (to a
// decision's [Inputs] and in a [LedgerMove]), that a decision made with
// [AdmissionController.AdmitWith] on it is never refused by the
// lock-free pre-check (its capacity answer comes from a transaction,
// whose order places it exactly), and that journal is told of every
// start and release.
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

// journalMove tells the provider's journal of a move, if it has one.
func (s *permitState) journalMove(kind moveKind, order uint64, elapsed time.Duration) {
	if j := s.provider().journal; j != nil {
		j.Moved(LedgerMove{Order: order, Admission: s.order, Elapsed: elapsed,
			Started: kind == moveStarted || kind == moveStartRefused, Refused: kind == moveStartRefused, Reclaimed: kind == moveReclaimed})
	}
}
