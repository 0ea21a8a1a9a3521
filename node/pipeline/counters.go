package pipeline

import (
	"fmt"
	"reflect"

	"latent.dev/admission/core"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/policy"
)

// Counters is every counter a reservation or a cell moves: the ledger's
// scopes (one consistent [core.Usage]), its live table, the scheduler's
// waiting and executing activations, and the pool's cells. After all
// activations have ended, each must be exactly what it was before they
// started (a quarantine aside, which moves the pool's usable cells).
type Counters struct {
	Ledger           core.Usage
	LiveReservations int
	// Waiting is each queue class's waiting activations in the
	// scheduler, in policy order (the ledger's queued slots are in
	// Ledger.QueueClasses).
	Waiting   []int
	Executing int
	Cells     [policy.NumCellClasses]cellpool.ClassStats
}

// Counters reads every counter. The ledger's scopes are one consistent
// view; the rest are read one by one, so compare them only when the
// pipeline is quiet.
func (p *Pipeline) Counters() Counters {
	pr := p.provider
	out := Counters{Ledger: pr.Usage(), LiveReservations: pr.LiveReservations(), Executing: p.scheduler.Executing()}
	for _, q := range out.Ledger.QueueClasses {
		out.Waiting = append(out.Waiting, p.scheduler.Queued(q.Name))
	}
	for class := range policy.NumCellClasses {
		out.Cells[class] = p.pool.Stats(policy.CellClass(class))
	}
	return out
}

// Equal reports whether every counter matches.
func (c Counters) Equal(o Counters) bool { return reflect.DeepEqual(c, o) }

// Diff names the counters that differ from o, for a failure message.
func (c Counters) Diff(o Counters) []string {
	var d []string
	add := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			d = append(d, fmt.Sprintf("%s: %+v != %+v", name, a, b))
		}
	}
	add("node", c.Ledger.Node, o.Ledger.Node)
	add("tenants", c.Ledger.Tenants, o.Ledger.Tenants)
	add("trust classes", c.Ledger.TrustClasses, o.Ledger.TrustClasses)
	add("queue classes", c.Ledger.QueueClasses, o.Ledger.QueueClasses)
	add("cell classes", c.Ledger.CellClasses, o.Ledger.CellClasses)
	add("live reservations", c.LiveReservations, o.LiveReservations)
	add("waiting", c.Waiting, o.Waiting)
	add("executing", c.Executing, o.Executing)
	for class := range policy.NumCellClasses {
		add("cells of "+policy.CellClass(class).String(), c.Cells[class], o.Cells[class])
	}
	return d
}

// Residue names what is still held: any reservation in the ledger
// ([core.Usage.Held]), any waiting or executing activation, any leased
// cell. A drained pipeline has none; quarantined cells are not residue
// (they are reported by the pool and are the runner's intended answer to
// an uncertain cleanup).
func (c Counters) Residue() []string {
	r := c.Ledger.Held()
	for i, n := range c.Waiting {
		if n != 0 {
			r = append(r, fmt.Sprintf("queue class %s: %d waiting", c.Ledger.QueueClasses[i].Name, n))
		}
	}
	for class, cc := range c.Cells {
		if cc.Leased != 0 {
			r = append(r, fmt.Sprintf("cell class %s: %d leased", policy.CellClass(class), cc.Leased))
		}
	}
	if c.LiveReservations != 0 {
		r = append(r, fmt.Sprintf("live table holds %d", c.LiveReservations))
	}
	if c.Executing != 0 {
		r = append(r, fmt.Sprintf("%d executing", c.Executing))
	}
	return r
}
