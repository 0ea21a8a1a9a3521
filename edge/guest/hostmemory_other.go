//go:build !linux

package guest

import "math"

// systemMemoryBytes is not read outside Linux.
func systemMemoryBytes() uint64 { return math.MaxUint64 }
