package catalog

import (
	"strconv"
	"testing"
)

func benchmarkPin(b *testing.B) *Pin {
	f := goodFile(b)
	f.Capacity = GenerousCapacity
	c, err := FromFile(f)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 200 {
		mustDeploy(b, c, weighted("tenant-"+strconv.Itoa(i), "svc", 3, 1))
	}
	return c.Pin()
}

func BenchmarkRevisionPolicy(b *testing.B) {
	pin := benchmarkPin(b)
	rev := mustResolve(b, pin, Target{"acme", "thumbs", "resize"}, "k")
	forged := *rev
	forged.Generation++
	b.Run("accepted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = pin.RevisionPolicy(rev)
		}
	})
	b.Run("rejected", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = pin.RevisionPolicy(&forged)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = pin.RevisionPolicy(rev)
			}
		})
	})
}

func BenchmarkResolve(b *testing.B) {
	pin := benchmarkPin(b)
	target := Target{"tenant-7", "svc", "resize"}
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = pin.Resolve(target, "user-42")
	}
}

func BenchmarkDeploy(b *testing.B) {
	c, err := FromFile(goodFile(b))
	if err != nil {
		b.Fatal(err)
	}
	d := weighted("acme", "bench", 3, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Deploy(d); err != nil {
			b.Fatal(err)
		}
	}
}
