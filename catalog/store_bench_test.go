package catalog

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkCompactionStall measures what a compaction costs the writers of
// a store of 50,000 deployments (2,000 with -short). Each iteration is one
// round: an untimed Apply of replacements brings the store's garbage to
// within a few deploys of the compaction threshold; then single deploys,
// each timed, replace deployments until one starts a compaction, and 20
// more follow while it runs. It reports the median of all timed deploys
// and the median of those that started a compaction; the target is a
// ratio of at most 3 over at least 10 compactions, so run it with
// -benchtime=12x. Medians, because one fsync varies 40-fold.
//
//	go test -run '^$' -bench CompactionStall -benchtime 12x ./catalog/
func BenchmarkCompactionStall(b *testing.B) {
	n := 50_000
	if testing.Short() {
		n = 2_000
	}
	c := scaleCatalog(b, n, true)
	versions := [2][]Deployment{scaleDeployments(n, 1), scaleDeployments(n, 2)}
	sample, err := compileDeployment(&versions[0][0], 1)
	if err != nil {
		b.Fatal(err)
	}
	perDeploy := deploymentBytes(sample) + commitBytes
	next := 0 // the next deployment to replace, counting up through both versions
	replacement := func() Deployment {
		d := versions[next/n%2][next%n]
		next++
		return d
	}
	// untilCompaction is the garbage the store can still take before an
	// append starts a compaction.
	untilCompaction := func() int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.store
		return max(s.live, s.rewriteFloor) - (s.end - (s.header + s.live + commitBytes))
	}
	compacting := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.store.compaction != nil
	}
	var all, triggers []time.Duration
	deploy := func() (time.Duration, bool) {
		d := replacement()
		start := time.Now()
		if _, err := c.Deploy(d); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		all = append(all, took)
		return took, compacting()
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		waitForCompaction(c)
		// Replaced deployments become garbage: leave room for about ten
		// single deploys before the threshold.
		for untilCompaction() > 20*perDeploy {
			var ch Changes
			for range min(int(untilCompaction()/perDeploy)-10, n) {
				ch.Deploy = append(ch.Deploy, replacement())
			}
			if _, err := c.Apply(ch); err != nil {
				b.Fatal(err)
			}
			waitForCompaction(c)
		}
		b.StartTimer()
		for started := false; !started; {
			var took time.Duration
			took, started = deploy()
			if started {
				triggers = append(triggers, took)
			}
		}
		for range 20 {
			deploy()
		}
	}
	b.StopTimer()
	waitForCompaction(c)
	if len(triggers) == 0 {
		b.Fatal("no deploy started a compaction")
	}
	b.ReportMetric(float64(median(all).Nanoseconds()), "median-deploy-ns")
	b.ReportMetric(float64(median(triggers).Nanoseconds()), "median-compacting-deploy-ns")
	b.ReportMetric(float64(len(triggers)), "compactions")
	b.ReportMetric(float64(median(triggers))/float64(median(all)), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
