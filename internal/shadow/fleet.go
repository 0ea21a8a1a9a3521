package shadow

import (
	"time"

	"latent.dev/admission/internal/trace"
)

// keptFleetWrites is how many of a tenant's latest slice writes a replay
// keeps, to give a decision the very write it judged: a decision's order
// is drawn before it reads the slice, and a fleet line's before its write,
// so a decision may come after a write it did not yet see.
const keptFleetWrites = 8

// fleetWrite is one recorded write of a tenant's fleet slice.
type fleetWrite struct {
	writes    uint64
	published bool
	slice     int64
	until     time.Time
}

// fleetHistory is a tenant's latest writes, the current one last.
type fleetHistory struct {
	kept []fleetWrite
}

// fleetLine replays a fleet line: the candidate's provider gets the same
// slice (or withdrawal). A candidate policy that does not mark the tenant
// refuses it, and its decisions ignore slices, as the policy says.
func (r *replay) fleetLine(f *trace.Fleet) {
	if r.fleet == nil {
		r.fleet = map[string]*fleetHistory{}
	}
	h := r.fleet[f.Tenant]
	if h == nil {
		if len(r.fleet) >= r.compiled.NumTenants() {
			return // not a tenant of the candidate's: nothing to keep
		}
		if _, ok := r.compiled.TenantID(f.Tenant); !ok {
			return
		}
		h = &fleetHistory{}
		r.fleet[f.Tenant] = h
	}
	w := fleetWrite{writes: f.Writes, published: f.Published, slice: f.Slice, until: r.at(f.ValidUntilT)}
	if len(h.kept) == keptFleetWrites {
		copy(h.kept, h.kept[1:])
		h.kept = h.kept[:keptFleetWrites-1]
	}
	h.kept = append(h.kept, w)
	r.applyFleet(f.Tenant, w)
}

func (r *replay) applyFleet(tenant string, w fleetWrite) {
	if w.published {
		_ = r.provider.PublishFleetSlice(tenant, w.slice, w.until)
		return
	}
	r.provider.WithdrawFleetSlice(tenant)
}

// judgeFleet puts in force the write of tenant's slice that a decision
// judged (its recorded count of writes), when it is not the latest, and
// returns what puts the latest back.
func (r *replay) judgeFleet(tenant string, writes uint64) (restore func()) {
	h := r.fleet[tenant]
	if h == nil || len(h.kept) == 0 || h.kept[len(h.kept)-1].writes == writes {
		return func() {}
	}
	for _, w := range h.kept {
		if w.writes == writes {
			r.applyFleet(tenant, w)
			latest := h.kept[len(h.kept)-1]
			return func() { r.applyFleet(tenant, latest) }
		}
	}
	return func() {}
}
