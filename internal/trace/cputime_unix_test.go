//go:build unix

package trace_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system: what
// a benchmark spends on every core, less sensitive than the wall clock to
// a disk that makes writes wait and to other work on a shared host.
func cpuTime() (time.Duration, bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
