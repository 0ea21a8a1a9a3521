package catalog

import (
	"fmt"
	"strconv"
	"testing"
)

// scaleDeployments returns n one-route deployments, tenant-00000/svc
// upward.
func scaleDeployments(n int, weight uint64) []Deployment {
	out := make([]Deployment, n)
	for i := range out {
		out[i] = weighted(fmt.Sprintf("tenant-%05d", i), "svc", weight, 1)
	}
	return out
}

// scaleCatalog returns a catalog holding n deployments: in memory, or
// store-backed in a fresh directory.
func scaleCatalog(b *testing.B, n int, stored bool) *Catalog {
	b.Helper()
	c := New(GenerousCapacity)
	if stored {
		var err error
		if c, err = Create(b.TempDir(), GenerousCapacity); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
	}
	if _, err := c.Apply(Changes{Deploy: scaleDeployments(n, 3)}); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkPinResolve is the adapter's hot path, a pin then a resolution,
// as the catalog grows.
func BenchmarkPinResolve(b *testing.B) {
	for _, n := range []int{100, 5000, 10000} {
		b.Run("deployments="+strconv.Itoa(n), func(b *testing.B) {
			c := scaleCatalog(b, n, false)
			target := Target{"tenant-00007", "svc", "resize"}
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = c.Pin().Resolve(target, "user-42")
			}
		})
	}
}

// BenchmarkDeployInto replaces one deployment of a catalog of n at a time
// (so n stays put), in memory and store-backed; the store's rewrites are
// part of the average.
func BenchmarkDeployInto(b *testing.B) {
	for _, store := range []string{"memory", "log"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run("store="+store+"/deployments="+strconv.Itoa(n), func(b *testing.B) {
				c := scaleCatalog(b, n, store == "log")
				next := [2][]Deployment{scaleDeployments(n, 1), scaleDeployments(n, 2)}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := c.Deploy(next[i/n%2][i%n]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// BenchmarkApply deploys n deployments in one Apply into an empty store.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("deployments="+strconv.Itoa(n), func(b *testing.B) {
			deploys := scaleDeployments(n, 3)
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c, err := Create(b.TempDir(), GenerousCapacity)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := c.Apply(Changes{Deploy: deploys}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = c.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOpen reopens a store of n deployments: read, check every
// checksum, compile every deployment, take the lock.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10000} {
		b.Run("deployments="+strconv.Itoa(n), func(b *testing.B) {
			c := scaleCatalog(b, n, true)
			dir := c.store.dir
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				r, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = r.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkIndexLookup holds the trie's lookup to a Go map of the same
// deployments, the structure pins used before: the hit path of every
// resolution and admission lookup.
func BenchmarkIndexLookup(b *testing.B) {
	for _, n := range []int{100, 10000} {
		deps := make([]*deployment, n)
		x := emptyIndex()
		m := make(map[DeploymentKey]*deployment, n)
		edit := newEditToken()
		for i := range deps {
			deps[i] = &deployment{tenant: fmt.Sprintf("tenant-%05d", i), service: "svc"}
			x, _ = x.put(keyHash(deps[i].tenant, deps[i].service), deps[i], edit)
			m[DeploymentKey{deps[i].tenant, deps[i].service}] = deps[i]
		}
		b.Run("impl=trie/deployments="+strconv.Itoa(n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				d := deps[i%n]
				if x.get(keyHash(d.tenant, d.service), d.tenant, d.service) != d {
					b.Fatal("missed")
				}
				i += 7
			}
		})
		b.Run("impl=map/deployments="+strconv.Itoa(n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				d := deps[i%n]
				if m[DeploymentKey{d.tenant, d.service}] != d {
					b.Fatal("missed")
				}
				i += 7
			}
		})
	}
}
