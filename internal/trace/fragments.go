package trace

// fragments are the parts of a decision line that a node's decisions
// repeat: the principal, the target and the budget. The
// writer keeps each as the last decision that had it, with its encoding,
// and a decision whose part equals the kept one (compared by value: its
// strings are usually the very ones of the catalog and the policy, and
// compare by pointer) copies those bytes instead of encoding the part
// again. The bytes are AppendLine's; FuzzFragmentsMatchAppendLine holds
// them to it.
//
// One of each is kept: decisions that alternate between tenants miss,
// and a miss costs one comparison more than AppendLine. A part whose
// encoding is longer than maxFragmentBytes is never kept, so that the
// writer holds no long name.
type fragments struct {
	principal     Principal
	principalJSON []byte // empty: none kept
	target        Target
	targetJSON    []byte
	budget        budgetKey
	budgetJSON    []byte
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

// keep makes part (just appended, encoded) the kept fragment in buf; false
// when it is too long to keep (buf is then emptied: none kept).
func keep(buf *[]byte, part []byte) bool {
	if len(part) > maxFragmentBytes {
		*buf = (*buf)[:0]
		return false
	}
	*buf = append((*buf)[:0], part...)
	return true
}

func (e *fragments) appendPrincipal(dst []byte, p *Principal) []byte {
	if len(e.principalJSON) != 0 && *p == e.principal {
		return append(dst, e.principalJSON...)
	}
	start := len(dst)
	dst = appendPrincipal(dst, p)
	e.principal = Principal{}
	if keep(&e.principalJSON, dst[start:]) {
		e.principal = *p
	}
	return dst
}

func (e *fragments) appendTarget(dst []byte, t *Target) []byte {
	if len(e.targetJSON) != 0 && *t == e.target {
		return append(dst, e.targetJSON...)
	}
	start := len(dst)
	dst = appendTarget(dst, t)
	e.target = Target{}
	if keep(&e.targetJSON, dst[start:]) {
		e.target = *t
	}
	return dst
}

func (e *fragments) appendBudget(dst []byte, b *Budget) []byte {
	k := keyOf(b)
	if len(e.budgetJSON) != 0 && k == e.budget {
		return append(dst, e.budgetJSON...)
	}
	start := len(dst)
	dst = appendBudget(dst, b)
	if keep(&e.budgetJSON, dst[start:]) {
		e.budget = k
	}
	return dst
}
