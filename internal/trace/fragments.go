package trace

import "fmt"

// fragments are the parts of a decision line that a node's decisions
// repeat: the principal, the target and the budget. The writer keeps each
// as the last decision line in the current file had it, and a decision
// whose part equals the kept one leaves the part out and names it in
// "same" (Decision.Same) instead; a Reader keeps a fragments of its own
// for each file as it reads it, and puts the parts back (resolve). Parts compare by value (their
// strings are usually the very ones of the catalog and the policy, and
// compare by pointer).
//
// One of each is kept: decisions that alternate between tenants miss,
// and a miss costs a comparison. A part whose encoding is longer than
// maxFragmentBytes is never kept, so that the writer holds no long name.
// Whatever may have lost a line the reader would have seen (a new file,
// a failed write, a line that could not be encoded) forgets them all.
type fragments struct {
	principal    Principal
	target       Target
	budget       budgetKey
	hasPrincipal bool
	hasTarget    bool
	hasBudget    bool
}

// maxFragmentBytes is the longest encoding a fragment keeps: far more
// than any identifier a policy or a catalog holds takes.
const maxFragmentBytes = 1 << 10

// budgetKey is a budget by value.
type budgetKey struct {
	cpuFuel, memoryBytes uint64
	wallTimeNS           int64
	wallTime             bool
}

func keyOf(b *Budget) budgetKey {
	k := budgetKey{cpuFuel: b.CPUFuel, memoryBytes: b.MemoryBytes}
	if b.WallTimeNS != nil {
		k.wallTimeNS, k.wallTime = *b.WallTimeNS, true
	}
	return k
}

// reset forgets every kept part.
func (e *fragments) reset() { *e = fragments{} }

// same is the parts of d equal to the kept ones.
func (e *fragments) same(d *Decision) uint8 {
	var s uint8
	if p := d.Principal; p != nil && e.hasPrincipal && *p == e.principal {
		s |= SamePrincipal
	}
	if e.hasTarget && d.Target == e.target {
		s |= SameTarget
	}
	if e.hasBudget && keyOf(&d.Budget) == e.budget {
		s |= SameBudget
	}
	return s
}

// The keep methods make a part just written in full (encoded as n bytes)
// the kept one, or keep none when it is too long.

func (e *fragments) keepPrincipal(p *Principal, n int) {
	e.principal, e.hasPrincipal = *p, n <= maxFragmentBytes
	if !e.hasPrincipal {
		e.principal = Principal{}
	}
}

func (e *fragments) keepTarget(t *Target, n int) {
	e.target, e.hasTarget = *t, n <= maxFragmentBytes
	if !e.hasTarget {
		e.target = Target{}
	}
}

func (e *fragments) keepBudget(b *Budget) {
	e.budget, e.hasBudget = keyOf(b), true
}

// resolve is the reader's side: it puts the parts d names in Same back
// from the kept ones and clears Same, then keeps d's parts (a reader
// keeps any part, however long: the writer named none it did not keep).
// A line that names a part the file had not had yet, or names one it
// also carries, or names an unknown part, is refused.
func (k *fragments) resolve(d *Decision) error {
	s := d.Same
	switch {
	case s&^sameParts != 0:
		return fmt.Errorf(`"same" is %d: it names parts this reader does not know (it knows %d)`, s, sameParts)
	case s&SamePrincipal != 0 && d.Principal != nil, s&SameTarget != 0 && d.Target != (Target{}),
		s&SameBudget != 0 && (d.Budget != (Budget{})):
		return fmt.Errorf(`"same" is %d and the line carries a part it names`, s)
	case s&SamePrincipal != 0 && !k.hasPrincipal, s&SameTarget != 0 && !k.hasTarget, s&SameBudget != 0 && !k.hasBudget:
		return fmt.Errorf(`"same" is %d: it names a part no decision line before it in this file had`, s)
	}
	if s&SamePrincipal != 0 {
		p := k.principal
		d.Principal = &p
	}
	if s&SameTarget != 0 {
		d.Target = k.target
	}
	if s&SameBudget != 0 {
		b := k.budget
		d.Budget = Budget{CPUFuel: b.cpuFuel, MemoryBytes: b.memoryBytes}
		if b.wallTime {
			d.Budget.WallTimeNS = &b.wallTimeNS
		}
	}
	d.Same = 0
	if d.Principal != nil {
		k.keepPrincipal(d.Principal, 0)
	}
	k.keepTarget(&d.Target, 0)
	k.keepBudget(&d.Budget)
	return nil
}
