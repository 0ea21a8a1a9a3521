package fleet

import (
	"math"
	"sort"
)

// shareParams are the parameters of the allocation (docs/fleet.md,
// "The algorithm").
type shareParams struct {
	// aheadFraction and minAhead size the margin a node asks for above
	// its live count: max(minAhead, ceil(aheadFraction × live)), and 0
	// for a node with nothing live and nothing refused.
	aheadFraction float64
	minAhead      int64
}

// ahead is the margin above live a node wants, so an arrival finds room
// before the next round.
func (p shareParams) ahead(live int64, short bool) int64 {
	if live <= 0 && !short {
		return 0
	}
	a := int64(math.Ceil(p.aheadFraction * float64(live)))
	return max(a, p.minAhead)
}

// need is what a node states as its want: its live count, or, when it
// refused work for a full slice since the last round (short), twice what
// it holds and at least live plus the margin, so a node under a burst
// grows geometrically. Never more than the limit.
func (p shareParams) need(live, has, limit int64, short bool) int64 {
	n := live
	if short {
		n = max(live+p.ahead(live, short), 2*has)
	}
	return min(max(n, 0), limit)
}

// entitled is node self's share of limit: the max-min fair share of the
// needs, plus a fair share of what the needs leave over, divided by the
// margins each node asks ahead of its need.
func (p shareParams) entitled(limit int64, needs []int64, self int) int64 {
	shares := fairShare(limit, needs)
	left := limit
	aheads := make([]int64, len(needs))
	for i, s := range shares {
		left -= s
		aheads[i] = p.ahead(needs[i], false)
	}
	return shares[self] + fairShare(left, aheads)[self]
}

// fairShare is the max-min fair division of limit among wants
// (Doorman's FairShare, a water-fill): every node that wants no more than
// an equal share of what is left gets its want, and the rest split what
// remains equally. Shares are whole; the units an equal split leaves
// over go one each to the unsatisfied nodes in index order, which is
// the order of their node IDs, so every node computes the same
// division. When the wants fit the limit every node gets its want.
func fairShare(limit int64, wants []int64) []int64 {
	share := make([]int64, len(wants))
	order := make([]int, len(wants))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return wants[order[a]] < wants[order[b]] })
	left := max(limit, 0)
	for k, i := range order {
		rest := int64(len(order) - k)
		equal := left / rest
		if wants[i] <= equal {
			share[i] = max(wants[i], 0)
			left -= share[i]
			continue
		}
		// Every node from here on wants more than an equal split.
		unsatisfied := order[k:]
		sort.Ints(unsatisfied)
		extra := left - equal*rest
		for _, j := range unsatisfied {
			share[j] = equal
			if extra > 0 {
				share[j]++
				extra--
			}
		}
		break
	}
	return share
}

// decide is one node's next slice for a tenant, the slice it admits
// under: has is what it holds, need its stated want, ahead its margin,
// entitled its fair share and free the limit less every node's slice. It
// grows toward min(need + ahead, entitled) by at most free; it gives
// back down to its fair share when it holds more (others need it), and
// down to need + ahead when its idle capacity exceeds the margin twice
// over. The result may be below the live count: the caller then holds
// the live count in etcd and admits under the result, so new work waits
// until usage falls.
func decide(has, need, ahead, entitled, free int64) int64 {
	goal := min(need+ahead, entitled)
	switch {
	case goal > has:
		return has + max(min(goal-has, free), 0)
	case has > entitled:
		return entitled
	case has > need+2*ahead:
		return need + ahead
	}
	return has
}
