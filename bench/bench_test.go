package bench

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"latent.dev/admission/core"
	"latent.dev/admission/core/atomicledger"
	"latent.dev/admission/internal/model"
	"latent.dev/admission/policy"
)

var sinkTime time.Time
var sinkDuration time.Duration

// BenchmarkClock is context for the cycle: the cost of the clock reads it
// makes (one time.Now, one monotonic-only time.Since under the mutex, one
// time.Now when starting).
func BenchmarkClock(b *testing.B) {
	b.Run("op=now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkTime = time.Now()
		}
	})
	start := time.Now()
	b.Run("op=since", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkDuration = time.Since(start)
		}
	})
}

// BenchmarkCycle is one activation's whole admission life: validation,
// catalog verification, both clock reads, the commit and the permit, then
// StartExecution and Release. impl=semaphore is the floor: a weighted
// semaphore's TryAcquire and Release with no checks at all.
func BenchmarkCycle(b *testing.B) {
	e := newEnv(b, 4, 0.2)
	for _, im := range e.impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			req := e.valid
			b.ReportAllocs()
			for b.Loop() {
				if err := im.cycle(&req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("impl=semaphore", func(b *testing.B) {
		sem := semaphore.NewWeighted(64)
		b.ReportAllocs()
		for b.Loop() {
			if !sem.TryAcquire(1) {
				b.Fatal("semaphore full")
			}
			sem.Release(1)
		}
	})
}

// forge makes r name its handle's identity with a revision ID the
// catalog does not hold: a resolution edited after the fact, whose
// handle no longer vouches for it.
func forge(e *env, r *core.AdmissionRequest) {
	r.Revision.RevisionIdentity = r.Handle.RevisionIdentity()
	r.Revision.Revision = "rev-forged"
}

// BenchmarkReject measures each rejection family against both
// implementations.
func BenchmarkReject(b *testing.B) {
	const otherLimit = 4
	cases := []struct {
		name string
		cpu  float64
		edit func(e *env, r *core.AdmissionRequest)
		want core.Reason
	}{
		{"capacity", 0.2, func(e *env, r *core.AdmissionRequest) { *r = e.other; r.ActivationID = "over" }, core.ReasonCapacityExhausted},
		{"unauthorized", 0.2, func(e *env, r *core.AdmissionRequest) { r.Principal.Subject = "mallory" }, core.ReasonPrincipalNotAuthorized},
		{"unknown-revision", 0.2, forge, core.ReasonRevisionNotAvailable},
		{"overloaded", 0.95, func(e *env, r *core.AdmissionRequest) {}, core.ReasonNodeOverloaded},
		{"invalid-identifier", 0.2, func(e *env, r *core.AdmissionRequest) { r.ActivationID = "act 1" }, core.ReasonIdentifierInvalid},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b, otherLimit, 0.2)
			defer e.fillOther(b, otherLimit)()
			if err := e.load.Publish(core.LoadSample{Sequence: 2, ObservedAt: time.Now(), CPUPressure: tc.cpu, MemoryPressure: 0.2}); err != nil {
				b.Fatal(err)
			}
			req := e.valid
			tc.edit(e, &req)
			for _, im := range e.impls {
				b.Run("impl="+im.name, func(b *testing.B) {
					if _, err := im.admit(&req); err == nil || !reasonIs(err, tc.want) {
						b.Fatalf("want %s, got %v", tc.want, err)
					}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := im.admit(&req); err == nil {
							b.Fatal("admitted")
						}
					}
				})
			}
		})
	}
}

func reasonIs(err error, want core.Reason) bool {
	switch e := err.(type) {
	case core.Error:
		return e.Reason() == want
	case *model.Rejection:
		return e.Reason == string(want)
	}
	return false
}

// BenchmarkParallel admits from every P at once. workload=valid is all
// valid cycles of one hot tenant; workload=spread is all valid cycles,
// each goroutine of its own tenant (as many tenants as the largest -cpu,
// each with its own deployment); workload=flood is 90% rejected requests
// (a tenant at its limit, an unauthorized subject, a forged revision) and
// 10% valid cycles of the hot tenant; workload=reject is rejections only,
// the lock-free path that must scale with cores. valid-admits/s is the
// throughput of valid admissions, the figure a flood must not starve;
// rejections/s that of rejections.
func BenchmarkParallel(b *testing.B) {
	const otherLimit = 4
	for _, workload := range []string{"valid", "spread", "flood", "reject"} {
		b.Run("workload="+workload, func(b *testing.B) {
			e := newEnv(b, otherLimit, 0.2)
			defer e.fillOther(b, otherLimit)()
			for _, im := range e.impls {
				b.Run("impl="+im.name, func(b *testing.B) {
					var goroutine, valid, rejected atomic.Int64
					b.ReportAllocs()
					b.RunParallel(func(pb *testing.PB) {
						g := goroutine.Add(1)
						ok, flood := e.floodRequests(g)
						if workload == "spread" {
							ok = e.spreadRequest(g)
						}
						var n, mine, refused int64
						for pb.Next() {
							n++
							if workload == "reject" || (workload == "flood" && n%10 != 0) {
								if _, err := im.admit(flood[n%3]); err == nil {
									b.Error("a flood request was admitted")
									return
								}
								refused++
								continue
							}
							if err := im.cycle(ok); err != nil {
								b.Error(err)
								return
							}
							mine++
						}
						valid.Add(mine)
						rejected.Add(refused)
					})
					if workload != "reject" {
						b.ReportMetric(float64(valid.Load())/b.Elapsed().Seconds(), "valid-admits/s")
					}
					if workload == "flood" || workload == "reject" {
						b.ReportMetric(float64(rejected.Load())/b.Elapsed().Seconds(), "rejections/s")
					}
				})
			}
		})
	}
}

// floodRequests are goroutine g's requests in the parallel workloads:
// its valid one, then the flood's three kinds (a tenant at its limit, an
// unauthorized subject, a forged revision).
func (e *env) floodRequests(g int64) (valid *core.AdmissionRequest, flood [3]*core.AdmissionRequest) {
	ok := e.valid
	ok.ActivationID = "p" + strconv.FormatInt(g, 10)
	capacity := e.other
	capacity.ActivationID = "over-" + strconv.FormatInt(g, 10)
	unauthorized := e.valid
	unauthorized.Principal.Subject = "mallory"
	forged := e.valid
	forge(e, &forged)
	return &ok, [3]*core.AdmissionRequest{&capacity, &unauthorized, &forged}
}

// spreadRequest is goroutine g's valid request in the spread workload:
// its own tenant's (goroutines share tenants only past spreadTenants).
func (e *env) spreadRequest(g int64) *core.AdmissionRequest {
	req := e.spread[int(g-1)%len(e.spread)]
	req.ActivationID = "p" + strconv.FormatInt(g, 10)
	return &req
}

// BenchmarkFloodByKind is the ledger's flood workload with every call
// timed on its own, so that it shows what each kind costs when the cores
// share the ledger (docs/scaling.md, "What a flood costs"). Each figure
// includes the two clock reads that time it, about 50 ns here; compare
// them across -cpu, not with BenchmarkReject.
func BenchmarkFloodByKind(b *testing.B) {
	e := newEnv(b, 4, 0.2)
	defer e.fillOther(b, 4)()
	im := e.impls[0]
	kinds := [...]string{"capacity", "unauthorized", "forged", "cycle"}
	var goroutine atomic.Int64
	var total, count [len(kinds)]atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		ok, flood := e.floodRequests(goroutine.Add(1))
		var spent, calls [len(kinds)]int64
		for n := int64(1); pb.Next(); n++ {
			start := time.Now()
			if n%10 != 0 {
				k := n % 3
				if _, err := im.admit(flood[k]); err == nil {
					b.Error("a flood request was admitted")
					return
				}
				spent[k] += int64(time.Since(start))
				calls[k]++
				continue
			}
			if err := im.cycle(ok); err != nil {
				b.Error(err)
				return
			}
			spent[3] += int64(time.Since(start))
			calls[3]++
		}
		for i := range kinds {
			total[i].Add(spent[i])
			count[i].Add(calls[i])
		}
	})
	for i, kind := range kinds {
		if c := count[i].Load(); c > 0 {
			b.ReportMetric(float64(total[i].Load())/float64(c), "ns/"+kind)
		}
	}
}

// BenchmarkCriticalSection is the time one admit-start-release cycle holds
// the ledger's mutex: the three transactions with what runs inside them
// (the commit's clock resample, duplicate check, capacity check, backlog
// read and reservation; the start's resample and queued-slot return; the
// release). Its inverse, bound-cycles/s, is the most cycles per second
// one node can pass whatever its cores, with warm caches
// (docs/scaling.md, "The ceiling of one mutex").
func BenchmarkCriticalSection(b *testing.B) {
	e := newEnv(b, 4, 0.2)
	l := atomicledger.New(policy.MustCompile(e.policy))
	r := atomicledger.Reservation{CPUFuel: 1, MemoryBytes: 1}
	fp := atomicledger.FingerprintOf(0, "cs")
	first := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		var tk atomicledger.Ticket
		l.Update(func(tx atomicledger.Tx) {
			sinkDuration = time.Since(first)
			if tx.Contains(fp, 0, "cs") || tx.Shortfall(&r).Scope != atomicledger.NoScope {
				b.Fatal("the ledger refused the reservation")
			}
			sinkDuration += time.Duration(tx.CellBacklog(0))
			tk = tx.Reserve(fp, "cs", r)
		})
		l.Update(func(tx atomicledger.Tx) {
			sinkDuration = time.Since(first)
			tx.Start(tk)
		})
		l.Update(func(tx atomicledger.Tx) { tx.Release(tk) })
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "bound-cycles/s")
}
