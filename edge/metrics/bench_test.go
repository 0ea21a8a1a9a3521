package metrics_test

import (
	"sync"
	"testing"
	"time"

	"latent.dev/admission/core"
)

// BenchmarkCycle is admit, start and release of one activation (the
// bench package's cycle) with no collector, with the collector
// registered, and with it registered and scraped every 10ms on another
// goroutine (a far shorter interval than any real scrape). The collector
// keeps no counters of its own, so the first two must be within noise:
//
//	go test -run '^$' -bench BenchmarkCycle -count 10 ./metrics | tee cycle.txt
//	benchstat -col /collector cycle.txt
func BenchmarkCycle(b *testing.B) {
	for _, mode := range []string{"none", "registered", "scraped"} {
		b.Run("collector="+mode, func(b *testing.B) {
			n := newNode(b)
			if err := n.load.Publish(core.LoadSample{Sequence: 1, ObservedAt: n.t0, CPUPressure: 0.2, MemoryPressure: 0.2}); err != nil {
				b.Fatal(err)
			}
			var stop chan struct{}
			var scraper sync.WaitGroup
			if mode != "none" {
				reg := register(b, n)
				if mode == "scraped" {
					stop = make(chan struct{})
					scraper.Add(1)
					go func() {
						defer scraper.Done()
						tick := time.NewTicker(10 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-stop:
								return
							case <-tick.C:
								if _, err := reg.Gather(); err != nil {
									b.Error(err)
									return
								}
							}
						}
					}()
				}
			}
			req := request("acme")
			b.ReportAllocs()
			for b.Loop() {
				p, err := n.controller.Admit(req)
				if err != nil {
					b.Fatal(err)
				}
				exec, err := p.StartExecution()
				if err != nil {
					b.Fatal(err)
				}
				exec.Release()
			}
			b.StopTimer()
			if stop != nil {
				close(stop)
				scraper.Wait()
			}
		})
	}
}
