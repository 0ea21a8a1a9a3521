// Package guest runs WebAssembly guests for the node: an artifact store
// of modules named by their SHA-256 digest, and a node/runner Backend on
// the pure-Go wazero runtime (no cgo) that runs them as WASI commands
// under the permit's obligations. It lives in the edge module, so that
// embedders of core, policy and catalog never get wazero.
//
// # Use
//
//	store, err := guest.OpenStore(artifactsDir, 0)    // ARTIFACTS/sha256/<hex>.wasm
//	err = store.Put(digest, body)                     // verified while streamed
//	backend, err := guest.New(ctx, guest.Config{Artifacts: store, MaxResponseBytes: max})
//	err = backend.Deploy(ctx, deployment)             // before catalog.Deploy: load, verify, compile
//	p, err := pipeline.New(provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": backend}})
//	report, err := p.Invoke(ctx, controller, request, body)
//	...
//	p.Drain(); backend.Close(ctx)
//
// The tests build Go main packages into guests with the standard
// toolchain (edge/internal/guesttest); `make guests` builds them the same
// way.
//
// # Artifacts
//
// A release names its module by release.artifact_digest,
// "sha256:<64 lowercase hex>" ([ParseDigest]); the [Store] keeps it at
// ROOT/sha256/<hex>.wasm. [Store.Put] streams a body into a temporary
// file while hashing it, reads at most the size limit plus one byte,
// and publishes the file (fsync, rename, directory fsync) only when it
// hashes to the digest. [Store.Load] reads the file back and verifies the
// hash again before anything compiles it. Every error about an artifact
// is an [*ArtifactError] naming the digest and, where one was involved,
// the file, with a fixed reason ([ErrArtifactNotFound],
// [ErrDigestMismatch], [ErrInvalidModule], ...).
//
// # Compilation and the module cache
//
// [Backend.Prepare] loads, verifies, scans and compiles every artifact a
// deployment names, once per digest, switching nothing; [Prepared.Commit]
// then replaces what the (tenant, service) pair had, at once, and
// returns the replaced deployment so that a caller whose own commit (a
// catalog's) fails can put it back. [Backend.Deploy] is the two in a
// row. A compile runs under the caller's context and stops when it ends
// (wazero checks it between functions when compiling on more than one
// worker). [Backend.Run] never compiles. A module is
// valid only as a WASI command: it exports "_start" () -> () and one
// memory, "memory"; it imports no memory, table or global, and only
// functions that wasi_snapshot_preview1 provides with the same
// signature; it has no start section (see Module limits). The cache is
// bounded twice: a module is closed as soon as no deployment references
// it (reference counts: one per deployed or prepared release, one per
// held release, one per running guest, so a guest whose deployment was
// replaced keeps its module until it stops), and the backend never holds more than Config.MaxModules
// (default [DefaultMaxModules]) compiled modules: a deployment that would
// pass it fails with [ErrTooManyModules]. A replacement holds old and
// new modules for a moment, so it needs room for both.
//
// [Backend.Hold] keeps one release of a pair runnable until its done
// function is called, whatever is deployed meanwhile: the node holds the
// release an activation was admitted for from resolution to the
// activation's end, so an activation queued for a cell across a redeploy
// or an undeploy runs the release it was admitted for, not a platform
// failure.
//
// # The ABI
//
// A guest is a WASI command, instantiated fresh for every activation and
// closed before Run returns, so nothing of one activation survives into
// the next and the cell has nothing to scrub. What the backend keeps across
// activations holds no guest's data: a run's module configuration and
// fuel clock (run.go), and the arrays of ended guests' linear memories
// of at most [RetainedMemoryBytes], cleared over every byte a guest could
// reach before the next guest starts in one (run.go, memoryPool; see
// TestAGuestNeverSeesAnotherGuestsMemory). Standard input is the request
// body; standard output, up to Config.MaxResponseBytes, is the response
// body; standard error is discarded. The guest sees the real wall and
// monotonic clocks, crypto/rand, no arguments, no environment, no files
// and no sockets. A sleep (poll_oneoff) ends early when the run's
// context does, so a sleeping guest cannot outlive its deadline.
//
//	how _start ended                      runner exit          outcome (node/runner)
//	returned, or exit code 0              ExitReturned         succeeded, body = stdout
//	exit code n != 0                      ExitDeclaredError    declared-error, body = stdout
//	trap (unreachable, bounds, ...)       ExitTrapped          trapped
//	stdout past MaxResponseBytes          ExitTrapped          trapped, no body
//	deadline or cancellation              ExitInterrupted      deadline-exceeded / canceled
//	fuel time used up                     ExitInterrupted      fuel-exhausted
//	memory growth refused, then a trap
//	  or a non-zero exit                  ExitInterrupted      memory-exhausted
//	initial memory over the grant         ExitInterrupted      memory-exhausted (never started)
//	instantiation failed (a data or
//	  element segment out of bounds)      ExitTrapped          trapped
//	release not deployed, backend
//	  closed meanwhile                    ExitPlatformFailure  platform-failure
//
// Output past the bound is a broken response, not a truncated one: the
// first write past it fails, the output so far is dropped and the guest
// is interrupted at once; the runner reports it as a trap, the guest's
// fault (HTTP 502), not the node's. An output of exactly the bound is a
// success.
//
// # Module limits
//
// wazero would compile, and run, modules that cost the node what no
// grant sees, so every module is scanned before it compiles (scan.go):
// one pass over the binary, linear in its size, that decodes the code
// section instruction by instruction with all its immediates (LEB128,
// block types, br_table, memory arguments, the 0xFC and 0xFD prefixes),
// because wazero's compiled module exposes neither tables nor opcodes.
// The scanner's one duty is never to misread: an opcode outside the
// WebAssembly 2.0 features the runtime enables is refused, not skipped,
// and LEB128 is read as strictly as the format requires, so every
// instruction it passes is the one wazero compiles; wazero then
// validates. A module is refused ([*ArtifactError] with one of these
// reasons, each naming its limit) when
//
//   - its code contains table.grow or table.fill ([ErrTableGrowth]): a
//     table grows in host memory, 8 bytes an entry up to 2^32 entries,
//     and Go's wasip1 output never grows or fills one;
//   - it has a start section ([ErrStartSection]), which would run inside
//     instantiation, before fuel metering;
//   - it passes a limit of limits.go: its size; the count of every
//     vector in it (types and their values, imports, functions, tables,
//     globals, exports, element segments and their entries, data
//     segments and the data count, a br_table's labels), each also held
//     to the bytes of its section, since wazero's decoder allocates for a
//     count before it reads an item; a body's bytes; a function's locals
//     (parameters included); block nesting; blocks and branches in one
//     function; the tables' initial entries; the compile work, Σ (blocks
//     and branches)², Σ labels² and Σ locals × nesting (wazero's compile
//     time grows with the square of a function's basic blocks and of a
//     br_table's labels, and its SSA construction with locals times
//     nesting); or what its instantiation allocates on the host, as
//     estimated from the counts ([MaxInstanceBytes]).
//
// Custom sections, "name" among them, are never read: wazero gets the
// module without them.
//
// The limits leave Go's wasip1 output room: a guest using net/http,
// encoding/json and text/template measured 10.7 MB, 6,483 functions,
// nesting 549, 984 blocks in one function, Σ blocks² 2.0·10^7 and Σ
// locals × nesting 1.0·10^6 (before branches counted as blocks); see
// docs/latentd.md for the table and the costs measured at the limits.
//
// # The instance
//
// An instantiation runs outside wazero's reach of the context: it
// allocates the tables' entries, the globals, a function reference for
// each element entry, the data and element instances and the imports'
// function instances, and wazero does not interrupt it. The scanner's
// limits bound it to [MaxInstanceBytes] as estimated ([InstanceCeilingBytes]
// as allocated, measured) and to milliseconds; the fuel clock runs from
// before it, and _start is not called once the run's context ended
// during it (the deadline or the fuel answers).
//
// # The call stack
//
// wazero runs a guest on a stack of its own, a Go byte slice it doubles
// (plus the calling frame) when a call needs more, and traps the first
// call that needs more once it is past 50,000,000 bytes; there is no
// setting. Deep recursion therefore ends as a trap, but holds host
// memory no grant sees: at most [StackCeilingBytes] (256 MiB) per
// running guest, measured at 169 MB allocated in all. The node counts
// it, with the instance's [InstanceCeilingBytes], into its sizing
// instead of the grant: [CheckCallStacks] checks that a number of cells
// (each runs one guest at a time) times [PerCellHostBytes] fits in the
// memory available, and latentd refuses to start when it does not
// ([HostMemoryBytes]: physical memory, the memory cgroup's limit,
// GOMEMLIMIT).
//
// # Memory
//
// wazero's RuntimeConfig.WithMemoryLimitPages is per runtime, and a
// module compiled by one runtime runs only there, so it cannot carry a
// per-activation grant. The backend uses one runtime whose page limit is
// the node's ceiling (Config.MaxMemoryBytes; a module whose initial
// memory is larger does not compile), and holds each guest to its own
// grant with a per-instance memory allocator (wazero's experimental
// MemoryAllocator): the module's initial memory is charged against the
// grant (runner.Guest.Budget) before instantiation (over the grant: the
// guest never starts), and every memory.grow charges the growth; a
// growth past the grant is refused, and memory.grow returns -1 to the
// guest. The peak and any refusal go back to the runner in the Exit. A guest that
// handles the refusal may still succeed; one that then traps or exits
// non-zero (Go's runtime exits 2 when out of memory) ends as
// memory-exhausted. The host's backing array grows geometrically, so it
// may hold up to twice what the guest was granted, never visible to it.
//
// # Fuel is execution time
//
// CPU fuel is metered as execution time at Config.FuelPerMillisecond
// (default [DefaultFuelPerMillisecond]: one unit per nanosecond), not
// as an instruction count: wazero counts no instructions. The clock
// starts before the instance is made (instantiation is part of the
// activation's cost, bounded by the module limits) and stops when
// _start returns; the fuel burnt is charged then, rounded up, and
// reported in the Exit. A timer set at the first instant the guest would
// pass its grant charges past it (capped at the grant, the refusal
// recorded) and interrupts the guest. Caveat: this is
// wall-clock time of the guest's goroutine, so time spent waiting for a
// CPU on a busy node, and in host calls (reading stdin, writing stdout,
// sleeping), burns fuel too: under load a guest gets less computation
// for the same fuel, never more.
//
// # Deadlines and interruption
//
// The runtime is built WithCloseOnContextDone(true): the compiled code
// checks whether its module was closed at every loop header, and the
// runtime closes it when the run's context ends, so the permit's
// deadline (the context's deadline, set by the scheduler), a
// cancellation, the fuel timer or the output bound stop even a guest
// spinning in a tight loop (code without loops cannot run long: deep
// recursion traps on the stack limit, see The call stack). The backend reads the deadline
// from the context only, as node/runner hands it over.
//
// # Caveats
//
// Instantiating a Go guest costs a few milliseconds (its data segments,
// tables and runtime start-up), far more than a hand-written module;
// see BenchmarkInvocation. A guest whose deployment was replaced after
// its admission, with a release the new deployment lacks, ends as a
// platform failure. The memory allocator is wazero's experimental API;
// the tests pin its behavior. Close ends running guests as platform
// failures: call it after the pipeline has drained.
package guest
