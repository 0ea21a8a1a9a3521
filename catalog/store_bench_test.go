package catalog

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCompactionStall measures what a compaction costs the writers of
// a store of 50,000 deployments (2,000 with -short). Each iteration is one
// round (see compactionRounds). It reports the median of all timed
// deploys and the median of those that started a compaction; the target
// is a ratio of at most 3 over at least 10 compactions, so run it with
// -benchtime=12x. Medians, because one fsync varies 40-fold.
//
//	go test -run '^$' -bench CompactionStall -benchtime 12x ./catalog/
func BenchmarkCompactionStall(b *testing.B) {
	n := 50_000
	if testing.Short() {
		n = 2_000
	}
	all, triggers, _ := compactionRounds(b, n)
	b.ReportMetric(float64(median(all).Nanoseconds()), "median-deploy-ns")
	b.ReportMetric(float64(median(triggers).Nanoseconds()), "median-compacting-deploy-ns")
	b.ReportMetric(float64(len(triggers)), "compactions")
	b.ReportMetric(float64(median(triggers))/float64(median(all)), "ratio")
}

// BenchmarkCompactionLockedPhase measures how long a compaction holds the
// catalog's mutex (the only part of it that writers wait for) in stores
// of 10,000 and 50,000 deployments, over the rounds of compactionRounds,
// and reports the median and the longest. The target at 50,000 is a
// median of at most 10 ms; run it with -benchtime=12x.
//
//	go test -run '^$' -bench CompactionLockedPhase -benchtime 12x ./catalog/
func BenchmarkCompactionLockedPhase(b *testing.B) {
	sizes := []int{10_000, 50_000}
	if testing.Short() {
		sizes = []int{2_000}
	}
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			_, _, locked := compactionRounds(b, n)
			if len(locked) == 0 {
				b.Fatal("no compaction swapped its file")
			}
			b.ReportMetric(float64(median(locked).Nanoseconds()), "median-locked-ns")
			b.ReportMetric(float64(slices.Max(locked).Nanoseconds()), "max-locked-ns")
			b.ReportMetric(float64(len(locked)), "compactions")
		})
	}
}

// compactionRounds runs b.N rounds of compaction on a store of n
// deployments. Each round: an untimed Apply of replacements brings the
// store's garbage to within a few deploys of the compaction threshold;
// then single deploys, each timed, replace deployments until one starts a
// compaction, and 20 more follow while it runs. It returns every timed
// deploy, those that started a compaction, and how long each compaction
// that swapped its file held the catalog's mutex.
func compactionRounds(b *testing.B, n int) (all, triggers, locked []time.Duration) {
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
	compacting := func() *compaction {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.store.compaction
	}
	deploy := func() (time.Duration, *compaction) {
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
		var comp *compaction
		for comp == nil {
			var took time.Duration
			if took, comp = deploy(); comp != nil {
				triggers = append(triggers, took)
			}
		}
		for range 20 {
			deploy()
		}
		<-comp.done
		if comp.swapped {
			locked = append(locked, comp.locked)
		}
	}
	b.StopTimer()
	waitForCompaction(c)
	if len(triggers) == 0 {
		b.Fatal("no deploy started a compaction")
	}
	return all, triggers, locked
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
