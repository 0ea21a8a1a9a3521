package core

import (
	"math"
	"sync/atomic"
	"time"

	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/policy"
)

// Fleet slices. A tenant the policy's fleet block marks is held, beside
// its own limits, to this node's slice of a fleet-wide limit on its live
// activations. A trusted broker (outside the library: it talks to the
// store that holds the fleet limit) publishes the slice and the local
// deadline it is valid until into the provider, as a sampler publishes
// load; admission reads it lock-free before the commit and again in the
// commit's transaction, after the tenant scope. Admission itself makes no
// network call and starts nothing.
//
// Each tenant has one entry in an array allocated with the provider. An
// entry is a latch (two copies of the pair and a sequence counter whose
// low bit says which copy readers use): a publisher writes the copy that
// readers are not using, so a reader always finds one whole pair, never a
// slice from one publish with the deadline of another, and a publish
// allocates nothing. A publisher writes with the ledger's mutex held
// ([atomicledger.Ledger.Exclude]), so no write falls between a commit's
// reading of the slice and its Reserve: a lock-free fleet rejection that
// saw no write since its room then judged the slice every later commit
// reads (TestLinearizableFleet caught a publish in that gap).

// fleetEntry is one tenant's slice: two copies of (slice, deadline) and
// the latch's sequence counter, on a cache line of its own.
type fleetEntry struct {
	seq   atomic.Uint64 // readers use copy seq&1; it moves twice per publish
	pairs [2]fleetPair
	// refused is the first of the tenant's refusal counters in
	// LocalQuotaProvider.fleetRefused (metricStripes of them); only a
	// fleet-limited tenant's entry has them.
	refused int
	_       [cacheLineBytes - 48]byte
}

// fleetPair is one copy: the slice plus one (0: no slice) and the
// deadline as nanoseconds after the provider's fleet epoch.
type fleetPair struct {
	slice atomic.Uint64
	until atomic.Int64
}

// fleetReading is one consistent pair, and the latch's sequence when it
// was read.
type fleetReading struct {
	slice uint64 // the slice plus one; 0: none published (or withdrawn)
	until int64  // nanoseconds after the fleet epoch
	seq   uint64
}

// read returns the entry's current pair. It retries only while a publish
// moved the latch during its three loads; a publisher paused half-way
// never stalls it, since the copy it writes is not the one readers use.
func (e *fleetEntry) read() fleetReading {
	for {
		seq := e.seq.Load()
		p := &e.pairs[seq&1]
		r := fleetReading{slice: p.slice.Load(), until: p.until.Load(), seq: seq}
		if e.seq.Load() == seq {
			return r
		}
	}
}

// unchanged reports whether no publish touched the entry since r was read.
func (e *fleetEntry) unchanged(r fleetReading) bool { return e.seq.Load() == r.seq }

// writeLocked publishes (slice, until); the caller holds the ledger's
// mutex.
func (e *fleetEntry) writeLocked(slice uint64, until int64) {
	e.seq.Add(1) // readers move to the other copy
	p := &e.pairs[0]
	p.slice.Store(slice)
	p.until.Store(until)
	e.seq.Add(1) // readers move to copy 0, which is whole
	p = &e.pairs[1]
	p.slice.Store(slice)
	p.until.Store(until)
}

// fleetVerdict judges one more activation of a tenant that holds live
// against reading r at now (nanoseconds after the fleet epoch): no slice,
// or one at or past its deadline, is unavailable; a slice with no room
// for live + 1 is full.
func fleetVerdict(r fleetReading, now int64, live uint64) *rejection {
	if r.slice == 0 || now >= r.until {
		return errFleetUnavailable
	}
	if live >= r.slice-1 {
		return errFleetFull
	}
	return nil
}

// Every write to an entry (a publish, a refused publish of a marked
// tenant, a withdrawal) moves its latch by two, so seq/2 counts them.

// PublishFleetSlice makes slice this node's share of tenant's fleet-wide
// limit on live activations, valid until validUntil: from then on (and
// at validUntil itself) the tenant is refused with fleet-unavailable
// until a later publish. validUntil is a reading of the node's clock,
// the one its controllers use, plus a duration (time.Now().Add(d) on the
// system clock, whose monotonic reading the comparison then uses); it is
// the local deadline a broker renews only after a successful renewal of
// its lease.
//
// A tenant the policy does not configure, or does not mark in its fleet
// block, is refused with [ErrFleetSliceRejected] and changes nothing. A
// negative slice, or a validUntil so far from the provider's creation
// that the difference does not fit a time.Duration, is refused too, and
// withdraws the tenant's slice: the tenant fails closed until a valid
// publish. A slice lowered below the tenant's live count revokes nothing:
// new work is refused until enough of it ends. Publishing allocates
// nothing; it takes the ledger's mutex for the write alone, as a short
// transaction does.
func (p *LocalQuotaProvider) PublishFleetSlice(tenant string, slice int64, validUntil time.Time) error {
	id, ok := p.fleetTenant(tenant)
	if !ok {
		return ErrFleetSliceRejected
	}
	until := validUntil.Sub(p.fleetEpoch)
	e := &p.fleet[id]
	if slice < 0 || until == math.MaxInt64 || until == math.MinInt64 {
		p.ledger.Exclude(func() { e.writeLocked(0, 0) })
		return ErrFleetSliceRejected
	}
	p.ledger.Exclude(func() { e.writeLocked(uint64(slice)+1, int64(until)) })
	return nil
}

// WithdrawFleetSlice removes tenant's slice at once, without waiting for
// its deadline (a broker that lost its lease): the tenant is refused
// with fleet-unavailable until the next publish. It reports false for a
// tenant that is not fleet-limited.
func (p *LocalQuotaProvider) WithdrawFleetSlice(tenant string) bool {
	id, ok := p.fleetTenant(tenant)
	if !ok {
		return false
	}
	e := &p.fleet[id]
	p.ledger.Exclude(func() { e.writeLocked(0, 0) })
	return true
}

// FleetSlice reports tenant's current slice and the deadline it is valid
// until (a time on the provider's fleet epoch, carrying its monotonic
// reading when the epoch does). published is false when none is
// published, and ok false for a tenant that is not fleet-limited. It is
// for operators (a status page), and is read lock-free.
func (p *LocalQuotaProvider) FleetSlice(tenant string) (slice int64, validUntil time.Time, published, ok bool) {
	id, ok := p.fleetTenant(tenant)
	if !ok {
		return 0, time.Time{}, false, false
	}
	r := p.fleet[id].read()
	if r.slice == 0 {
		return 0, time.Time{}, false, true
	}
	return int64(r.slice - 1), p.fleetEpoch.Add(time.Duration(r.until)), true, true
}

// FleetRefused is how many of tenant's requests admission has refused
// for a full slice so far (resource-exhausted / fleet / live-activations;
// a missing or expired slice is not counted), a count that only grows:
// what a broker reads, beside the tenant's live count
// ([LocalQuotaProvider.TenantSnapshot]), to state this node's wants. ok
// is false for a tenant that is not fleet-limited.
func (p *LocalQuotaProvider) FleetRefused(tenant string) (refused uint64, ok bool) {
	id, ok := p.fleetTenant(tenant)
	if !ok {
		return 0, false
	}
	first := p.fleet[id].refused
	var n int64
	for i := first; i < first+metricStripes; i++ {
		n += p.fleetRefused[i].n.Load()
	}
	return uint64(n), true
}

// countFleetRefusal counts err against the tenant when it is a full
// slice, on the calling goroutine's stripe (as the operator counters
// do), and returns err.
func (p *LocalQuotaProvider) countFleetRefusal(tenant policy.TenantID, err *rejection) *rejection {
	if err == errFleetFull {
		p.fleetRefused[p.fleet[tenant].refused+stripe()].n.Add(1)
	}
	return err
}

// fleetTenant is the ID of a configured, fleet-limited tenant.
func (p *LocalQuotaProvider) fleetTenant(name string) (policy.TenantID, bool) {
	id, ok := p.policy.TenantID(name)
	if !ok || !p.tenants[id].FleetLimited {
		return 0, false
	}
	return id, true
}

// fleetFirst is the first reading as nanoseconds after the fleet epoch:
// a derived reading is the controller's base offset plus the monotonic
// time since the base, so no time.Time is built.
func (c *AdmissionController) fleetFirst(d *decision) int64 {
	if d.derived {
		return addSaturating(c.baseFleet, d.sinceBase)
	}
	return int64(d.admittedAt.Sub(c.provider.fleetEpoch))
}

// addSaturating is a + b for a non-negative b, saturating at the largest
// int64.
func addSaturating(a int64, b time.Duration) int64 {
	if a > math.MaxInt64-int64(b) {
		return math.MaxInt64
	}
	return a + int64(b)
}

// subSaturating is a - b, saturating at the int64 bounds.
func subSaturating(a, b int64) int64 {
	d := a - b
	if (b < 0 && d < a) || (b > 0 && d > a) {
		if b < 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}

// preCheckFleet is the lock-free fleet check of a fleet-limited tenant's
// request that the ledger's pre-check found fitting with room. It
// answers a rejection only when it is exact: the key was absent, no
// Reserve ran and no slice was published between the pre-check's room
// and the moment the tenant's live count was read, so at that instant
// every earlier check passed and the slice's answer held. Otherwise it
// defers to the transaction.
func (c *AdmissionController) preCheckFleet(d *decision) *rejection {
	pr := c.provider
	r := &d.reservation
	e := &pr.fleet[r.Tenant]
	reading := e.read()
	now := c.fleetFirst(d)
	if reading.slice != 0 && now < reading.until && pr.ledger.Tenant(r.Tenant).Live < reading.slice-1 {
		return nil // room now: the transaction decides
	}
	live, ok := pr.ledger.TenantLiveSince(d.room, d.fingerprint, r)
	if !ok || !e.unchanged(reading) {
		return nil
	}
	return pr.countFleetRefusal(r.Tenant, fleetVerdict(reading, now, live))
}

// checkFleetLocked is the fleet check of step 13, in the commit's
// transaction, at now = the first reading + elapsed (fleetFirst): the tenant's live count is
// exact, and the slice is the one published at an instant inside the
// transaction.
func (c *AdmissionController) checkFleetLocked(tx atomicledger.Tx, d *decision, elapsed time.Duration) *rejection {
	pr := c.provider
	reading := pr.fleet[d.reservation.Tenant].read()
	now := addSaturating(c.fleetFirst(d), elapsed)
	d.commitFleet(reading, now)
	return pr.countFleetRefusal(d.reservation.Tenant, fleetVerdict(reading, now, tx.TenantLive(d.reservation.Tenant)))
}
