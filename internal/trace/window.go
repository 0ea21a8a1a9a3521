package trace

import (
	"container/heap"
)

// pendingLine is a line waiting in the window.
type pendingLine struct {
	line  Line
	pos   Position
	seq   uint64
	bytes int64
}

// lineHeap is the reorder window: a min-heap (container/heap) on
// (Order, read sequence) of small entries without pointers; the lines
// themselves wait in a slab.
type lineHeap struct {
	entries heapEntries
	slab    []pendingLine
	free    []int32
}

type heapEntry struct {
	order, seq uint64
	slot       int32
}

// heapEntries is the heap.Interface of the window's entries. push and
// pop below append and cut the slice themselves and let heap.Fix restore
// the order, as heap.Push and heap.Pop would: those box each entry in an
// interface, two allocations a line (3 allocs/op instead of 1 in
// BenchmarkReaderWindow). Push and Pop are here for heap.Interface.
type heapEntries []heapEntry

func (h heapEntries) Len() int { return len(h) }
func (h heapEntries) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.order < b.order || (a.order == b.order && a.seq < b.seq)
}
func (h heapEntries) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heapEntries) Push(x any)   { *h = append(*h, x.(heapEntry)) }
func (h *heapEntries) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *lineHeap) len() int { return len(h.entries) }

func (h *lineHeap) push(p pendingLine) {
	var slot int32
	if n := len(h.free); n > 0 {
		slot = h.free[n-1]
		h.free = h.free[:n-1]
		h.slab[slot] = p
	} else {
		slot = int32(len(h.slab))
		h.slab = append(h.slab, p)
	}
	h.entries = append(h.entries, heapEntry{order: p.line.Order, seq: p.seq, slot: slot})
	heap.Fix(&h.entries, len(h.entries)-1)
}

// minOrder is the smallest Order in the heap, which must not be empty.
func (h *lineHeap) minOrder() uint64 { return h.entries[0].order }

func (h *lineHeap) pop() pendingLine {
	n := len(h.entries) - 1
	h.entries.Swap(0, n)
	top := h.entries[n]
	h.entries = h.entries[:n]
	if n > 0 {
		heap.Fix(&h.entries, 0)
	}
	p := h.slab[top.slot]
	h.slab[top.slot] = pendingLine{}
	h.free = append(h.free, top.slot)
	return p
}
