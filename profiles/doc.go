// Package profiles holds the command that summarizes the CPU and
// allocation profiles `make profile` writes to profiles/out/ (which is not
// committed).
//
// # Making profiles
//
//	make profile
//
// runs the ledger's cycle benchmark (BenchmarkCycle/impl=ledger) and the
// parallel 90/10 flood (BenchmarkParallel/workload=flood/impl=ledger) with
// -cpuprofile and -memprofile, then prints each profile's top functions
// with profiles/top.
//
// # Reading them
//
// In a CPU profile of the cycle, expect the clock (time.runtimeNow,
// runtime.nanotime), identifier validation, the map lookups of the tenant
// allowlist and the catalog pin (aeshashbody, mapaccess), the permit's one
// allocation and its finalizer bookkeeping (runtime.addfinalizer,
// removefinalizer), and the commit under the mutex. Anything else near the
// top is new work on the hot path. In an allocation profile, admission
// should show exactly one object per admitted request (newPermit) and
// nothing for rejections. For a closer look:
//
//	go tool pprof -top profiles/out/cycle.cpu.prof
//	go tool pprof -list 'core.*decide' profiles/out/cycle.cpu.prof
package profiles
