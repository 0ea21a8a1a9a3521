//go:build !unix

// Package cputime reads the CPU time this process has used, for the
// benchmarks that report it beside the wall time.
package cputime

import "time"

// Process is not measured here: ok is false.
func Process() (d time.Duration, ok bool) { return 0, false }
