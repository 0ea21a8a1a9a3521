//go:build !linux

package loadsampler

import "runtime"

// usableCPUs is the number of CPUs this process may run on, as the Go
// runtime sees it.
func usableCPUs() int { return runtime.NumCPU() }
