package guest

import (
	"math"
	"math/bits"
	"runtime/debug"
)

// StackCeilingBytes is the most host memory one running guest's call
// stack can take, counted into the node's memory sizing because no grant
// sees it and wazero has no setting for it.
//
// wazero's compiler runs a guest on a stack of its own, a Go byte slice
// that starts at 10,240 bytes and, when a call needs more, is replaced by
// one of twice the length plus the calling function's frame; a stack
// longer than 50,000,000 bytes is not grown again, and the call traps
// (wazero v1.12, internal/engine/wazevo/call_engine.go, callStackCeiling
// is compared with the length in bytes). Unbounded recursion therefore
// ends in a trap, holding at its deepest the last stack (at most
// 2·50,000,000 + frame + 16 bytes) and, while that one is filled from the
// previous, the previous (at most 50,000,000); the earlier, shorter
// stacks are garbage that the collector may not have reclaimed yet, less
// than the previous one together. So one guest allocates at most
// 4·50,000,000 bytes plus a frame. With a frame of a few kilobytes
// (functions within the module limits) the doubling from 10,240 bytes
// makes it 10,240·(2^14−1) ≈ 168 MB in all, of which 126 MB are live
// at once; see TestDeepRecursionStackCeiling. The ceiling adds room for
// one frame of up to 56 MiB.
const StackCeilingBytes = 256 << 20

// PerCellHostBytes is the host memory that no grant sees and that one
// cell's guest can take at worst: its call stack (StackCeilingBytes), its
// instance (InstanceCeilingBytes) and the array of linear memory the
// backend keeps for the next guest once it ends (RetainedMemoryBytes).
const PerCellHostBytes = StackCeilingBytes + InstanceCeilingBytes + RetainedMemoryBytes

// CheckCallStacks reports whether available bytes of memory hold the
// worst-case call stacks and instances of cells guests running at once,
// and the guest memories kept after them: cells · PerCellHostBytes ≤
// available. latentd calls it at start with the sum of its cell classes'
// parallelism and [HostMemoryBytes], and refuses to start on
// ErrStackMemory. The guests' linear memory while they run is not counted
// here: admission charges it to the grants.
func CheckCallStacks(cells, available uint64) error {
	hi, need := bits.Mul64(cells, PerCellHostBytes)
	if hi != 0 || need > available {
		return ErrStackMemory
	}
	return nil
}

// HostMemoryBytes is the memory this process may use: the smallest of
// the machine's physical memory, the limit of its memory cgroup (v1 or
// v2, where one applies) and the Go runtime's memory limit (GOMEMLIMIT,
// where set). A source that cannot be read is left out; where none can
// (physical memory is read on Linux only), it is the largest value.
func HostMemoryBytes() uint64 {
	limit := uint64(math.MaxUint64)
	if soft := debug.SetMemoryLimit(-1); soft > 0 && soft < math.MaxInt64 {
		limit = uint64(soft)
	}
	return min(limit, systemMemoryBytes())
}
