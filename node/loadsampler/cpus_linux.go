package loadsampler

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// usableCPUs is the number of CPUs this process may run on: its affinity
// mask, which a cpuset or taskset narrows.
func usableCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return runtime.NumCPU()
	}
	if n := set.Count(); n > 0 {
		return n
	}
	return runtime.NumCPU()
}
