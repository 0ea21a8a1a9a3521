//go:build unix

// Package cputime reads the CPU time this process has used, for the
// benchmarks that report it beside the wall time: what a benchmark
// spends on every core (a recording's writer too), which is less
// sensitive than the wall clock to a disk that makes writes wait and to
// other work on a shared host.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time this process has used, user and system; ok is
// false where it cannot be read.
func Process() (d time.Duration, ok bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
