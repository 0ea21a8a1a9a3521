//go:build unix

package cputime

import "testing"

// Process reads a CPU time that grows with the work the process does.
func TestProcessGrowsWithWork(t *testing.T) {
	before, ok := Process()
	if !ok {
		t.Fatal("no CPU time on a unix system")
	}
	after, sink := before, 0
	for after == before {
		for i := range 1_000_000 {
			sink += i
		}
		after, _ = Process()
	}
	if after < before {
		t.Fatalf("CPU time went back from %v to %v (%d)", before, after, sink)
	}
}
