//go:build unix

package latentd

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time this process has used, user and system: a
// benchmark's work on every core (a recording's writer too), less
// sensitive than the wall clock to other work on a shared host.
func cpuTime() (time.Duration, bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
