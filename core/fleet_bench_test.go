package core

import (
	"testing"
)

// BenchmarkFleetCycle is an admit and release of one tenant, marked
// fleet-limited (with a slice that has room) or not, on the test
// fixture: the cost of the fleet check on the admitted path.
func BenchmarkFleetCycle(b *testing.B) {
	for _, tc := range []struct {
		name  string
		fleet bool
	}{{"tenant=plain", false}, {"tenant=fleet", true}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, nil)
			if tc.fleet {
				f = newFleetFixture(b)
				f.publishSlice(b, 1000, 1000)
			}
			req := request("cycle")
			b.ReportAllocs()
			for b.Loop() {
				p, err := f.ctl.Admit(req)
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
		})
	}
}

// BenchmarkFleetReject is the pre-check's fleet rejections, answered
// without the ledger's mutex.
func BenchmarkFleetReject(b *testing.B) {
	for _, tc := range []struct {
		name  string
		slice int64 // -1: none published
	}{{"slice=none", -1}, {"slice=full", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFleetFixture(b)
			if tc.slice >= 0 {
				f.publishSlice(b, tc.slice, 1000)
			}
			req := request("doomed")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.ctl.Admit(req); err == nil {
					b.Fatal("admitted")
				}
			}
		})
	}
}
