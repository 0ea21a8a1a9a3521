# latent admission: the README's commands are `make ci` (tests) and
# `make stress` (soak). Only Go is needed; tools come from the module proxy.

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
FUZZTIME    ?= 5s
BENCHCOUNT  ?= 6
GREMLINS    ?= $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0

# Fuzz targets as package:Target; each runs for FUZZTIME in CI.
FUZZ_TARGETS = ./policy:FuzzDecodePolicy ./policy:FuzzValidIdentifier \
	./catalog:FuzzOpenStore ./catalog:FuzzDecodeCatalog \
	./internal/scenario:FuzzDecodeScenario ./core:FuzzAdmit \
	./internal/trace:FuzzRecordedDecoderMatchesEncodingJSON ./internal/trace:FuzzAppendLineMatchesEncodingJSON

# The modules: the library (.), the node edge (edge/, its own module so
# that the library's embedders never get its dependencies; go.work ties
# them together), the node's command (cmd/latentd), the soak
# (cmd/stress, whose -http soaks latentd) and the operator's tool
# (cmd/admissionctl, whose `fleet` verbs speak to etcd), modules of their
# own because they import the edge, and the dependency-hygiene consumer
# under testdata/. go.work makes `go run ./cmd/admissionctl` work from
# the root.
# `go test ./...` at the root does not descend into edge/, so each target
# runs once per module.
EDGE_MODULES = edge cmd/latentd cmd/stress cmd/admissionctl
TIDY_MODULES = . edge cmd/latentd cmd/stress cmd/admissionctl testdata/consumer

.PHONY: fleet test race bench bench-edge bench-invoke compare compare-instructions compare-edge scaling profile stress stress-100k lint fuzz fuzz-ci scenarios tidy-check mutants ci guests node soak-http

# go test's default -timeout (10 minutes per test binary) assumes an idle
# machine: under -race beside the other packages' tests on a loaded
# two-core machine, edge/latentd alone compiles the Go guest in wazero
# twice, at up to a minute each. TEST_TIMEOUT only bounds a hang.
TEST_TIMEOUT ?= 30m

test:
	$(GO) test -timeout=$(TEST_TIMEOUT) ./...
	@set -e; for m in $(EDGE_MODULES); do (cd $$m && $(GO) test -timeout=$(TEST_TIMEOUT) ./...); done

race:
	$(GO) test -race -timeout=$(TEST_TIMEOUT) ./...
	@set -e; for m in $(EDGE_MODULES); do (cd $$m && $(GO) test -race -timeout=$(TEST_TIMEOUT) ./...); done

lint: tidy-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@set -e; for m in $(EDGE_MODULES); do (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...); done

# Each module outside the workspace (GOWORK=off), as a consumer of it
# would tidy it; a module whose go.mod or go.sum tidy would change fails.
tidy-check:
	@set -e; for m in $(TIDY_MODULES); do \
		cp $$m/go.mod /tmp/admission-go.mod.bak; cp $$m/go.sum /tmp/admission-go.sum.bak; \
		(cd $$m && GOWORK=off $(GO) mod tidy); \
		if ! cmp -s $$m/go.mod /tmp/admission-go.mod.bak || ! cmp -s $$m/go.sum /tmp/admission-go.sum.bak; then \
			echo "go mod tidy changes $$m/go.mod or $$m/go.sum"; cp /tmp/admission-go.mod.bak $$m/go.mod; cp /tmp/admission-go.sum.bak $$m/go.sum; exit 1; fi; \
	done

# Go 1.26's fuzz coordinator can report a bare "context deadline
# exceeded" when -fuzztime runs out while a worker is mid-call on a busy
# machine (golang/go#75804, fixed in Go 1.27). A run that fails that way
# and wrote no failing input is run once more; any other failure, or a
# second one, fails.
fuzz-ci:
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name $(FUZZTIME)"; \
		if $(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg >$$log 2>&1; then cat $$log; else \
			cat $$log; \
			if grep -q '^    context deadline exceeded$$' $$log && ! grep -q 'Failing input written' $$log; then \
				echo "fuzz $$pkg $$name: the coordinator's deadline race (golang/go#75804), no failing input; once more"; \
				$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
			else exit 1; fi; \
		fi; \
	done

fuzz:
	$(MAKE) fuzz-ci FUZZTIME=2m

# The shared examples are committed under testdata/shared-scenarios; the
# originals beside the checkout are replayed too when they are there.
scenarios:
	$(GO) run ./cmd/admissionctl replay --check -q testdata/shared-scenarios/*.json \
		$$(ls testdata/scenarios/*.json 2>/dev/null) $$(ls ../shared/scenarios/*.json 2>/dev/null)

# Valid admissions/s and rejections/s of the four parallel workloads
# (valid, spread, flood, reject) at -cpu 1,2,4,8,16, capped at the
# machine's cores (it says so), with each count's ratio to -cpu 1: the
# medians of SCALING_ROUNDS runs, each over every -cpu value in turn, so
# -cpu 1 and -cpu 2 are interleaved. Run it on a quiet machine.
SCALING_ROUNDS ?= 6
scaling:
	$(GO) run ./bench/scaling -rounds $(SCALING_ROUNDS)

# The single-goroutine benchmarks (clock, cycle, rejections, critical
# section) run at -cpu 1 pinned to the last core (taskset, and real-time
# priority where chrt is allowed), so that the scheduler and the other
# work of a shared machine move the ratios less; the collector then runs
# on the same core, so the cycle pays for its own garbage. The parallel
# ones run unpinned at -cpu 1 and 2. The whole set runs BENCHCOUNT times
# over, one count each, rather than each benchmark BENCHCOUNT times in a
# row, so that a slow spell of a shared machine spreads over every
# benchmark instead of skewing one ratio. One binary, one output, one
# benchstat, ledger against naive (-col /impl).
BENCH_PIN ?= $(shell command -v taskset >/dev/null 2>&1 && echo taskset -c $$(($$(nproc)-1))) $(shell chrt -f 50 true >/dev/null 2>&1 && echo chrt -f 50)

bench:
	$(GO) test -c -o bench.test ./bench
	rm -f bench.txt
	cd bench && for i in $$(seq $(BENCHCOUNT)); do \
		$(BENCH_PIN) ../bench.test -test.run='^$$' -test.bench='^Benchmark(Clock|Cycle|Reject|CriticalSection)$$' \
			-test.benchmem -test.cpu=1 || exit 1; \
		../bench.test -test.run='^$$' -test.bench='^BenchmarkParallel$$' -test.benchmem -test.cpu=1,2 || exit 1; \
	done | grep -v '^PASS' | tee ../bench.txt
	$(BENCHSTAT) -col /impl bench.txt

# The working tree against a named commit (BASE, required): the bench
# package built at BASE in a temporary git worktree and here, run
# interleaved COMPARE_ROUNDS times (the single-goroutine benchmarks at
# -cpu 1 pinned with taskset, BenchmarkParallel at -cpu 2), medians and
# ratios. Every speed claim is such a comparison.
COMPARE_ROUNDS ?= 6
COMPARE_BENCHTIME ?= 1s
compare:
	@test -n "$(BASE)" || { echo "make compare BASE=<commit>"; exit 2; }
	$(GO) run ./bench/compare -base $(BASE) -rounds $(COMPARE_ROUNDS) -benchtime $(COMPARE_BENCHTIME)

# The same single-goroutine benchmarks' instructions per op at BASE and in
# the working tree, counted by valgrind: a figure a busy host does not
# blur (bench/compare/instructions.sh says what it counts and what not).
compare-instructions:
	@test -n "$(BASE)" || { echo "make compare-instructions BASE=<commit>"; exit 2; }
	bench/compare/instructions.sh $(BASE)

# The admission cycle with and without the metrics collector registered
# (and scraped every 10ms), compared by benchstat.
bench-edge:
	cd edge && $(GO) test -run='^$$' -bench='^BenchmarkCycle$$' -benchmem -count=$(BENCHCOUNT) ./metrics | tee ../bench-edge.txt
	$(BENCHSTAT) -col /collector bench-edge.txt

# CPU and allocation profiles of the ledger's cycle and of the 90/10
# flood, written to profiles/out/ (not committed), then their top functions.
profile:
	@mkdir -p profiles/out
	$(GO) test -run='^$$' -bench='^BenchmarkCycle$$/^impl=ledger$$' -benchtime=2s -o profiles/out/bench.test \
		-cpuprofile profiles/out/cycle.cpu.prof -memprofile profiles/out/cycle.mem.prof ./bench
	$(GO) test -run='^$$' -bench='^BenchmarkParallel$$/^workload=flood$$/^impl=ledger$$' -benchtime=2s -o profiles/out/bench.test \
		-cpuprofile profiles/out/flood.cpu.prof -memprofile profiles/out/flood.mem.prof ./bench
	$(GO) run ./profiles/top profiles/out/cycle.cpu.prof profiles/out/cycle.mem.prof profiles/out/flood.cpu.prof profiles/out/flood.mem.prof

# cmd/stress is a module of its own; go.work makes `go run ./cmd/stress`
# work from the root. STRESS_FLAGS=-http soaks an in-process latentd over
# loopback (the code of `make soak-http`).
stress:
	$(GO) run ./cmd/stress $(STRESS_FLAGS)

# 100,000 distinct rejected targets in an isolated child: admission
# in-process (linuxtest), then latentd over loopback HTTP (cmd/latentd).
stress-100k:
	$(GO) test -run 'TestRejectedTargetsKeepResourcesFlat100k$$' -count=1 -v ./linuxtest -args -stress-100k
	cd cmd/latentd && $(GO) test -run 'TestRejectedTargetsOverHTTPKeepResourcesFlat100k$$' -count=1 -v . -args -stress-100k

# Mutation testing of the decision logic, one package at a time (slow:
# minutes per package; not part of ci). Prints each package's score and
# the surviving mutants not in testdata/mutants-equivalent.txt; fails
# below MUTANTS_MIN percent or when that list names a mutant that no
# longer survives. Gremlins mutates copies in the temporary folder, never
# the working tree.
MUTANT_PACKAGES ?= core/deadline core/atomicledger policy core
GREMLINS_FLAGS  ?= --workers 1 --timeout-coefficient 10
MUTANTS_MIN     ?= 95

mutants:
	$(GO) run ./internal/mutants -gremlins '$(GREMLINS)' -flags '$(GREMLINS_FLAGS)' \
		-equivalent testdata/mutants-equivalent.txt -min $(MUTANTS_MIN) $(MUTANT_PACKAGES)

# Each step runs in turn and prints how long it took (also when it
# fails), so that a slow step is seen before it becomes a failure; the
# first step that fails stops ci with its status, as before.
CI_STEPS = lint race fuzz-ci scenarios

ci:
	@set -e; total=$$(date +%s); for step in $(CI_STEPS); do \
		start=$$(date +%s); echo "== ci: $$step"; \
		if $(MAKE) --no-print-directory $$step; then \
			echo "== ci: $$step passed in $$(( $$(date +%s) - start ))s"; \
		else status=$$?; echo "== ci: $$step FAILED after $$(( $$(date +%s) - start ))s"; exit $$status; fi; \
	done; echo "== ci: every step passed in $$(( $$(date +%s) - total ))s"

# The test guests under edge/guest/testdata/guests, built as the tests
# build them (edge/internal/guesttest.BuildGoGuest): GOOS=wasip1 GOARCH=wasm, -trimpath,
# -buildvcs=false, outside the workspace. One toolchain gives the same
# bytes on every run; the digests are printed for a release's
# artifact_digest.
GUESTS_SRC = edge/guest/testdata/guests
GUESTS_OUT = edge/guest/testdata/out

guests:
	@mkdir -p $(GUESTS_OUT)
	@set -e; for dir in $(GUESTS_SRC)/*/; do name=$$(basename $$dir); \
		(cd $$dir && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 GOWORK=off GOFLAGS= \
			$(GO) build -trimpath -buildvcs=false -o $(CURDIR)/$(GUESTS_OUT)/$$name.wasm .); \
		echo "sha256:$$(sha256sum $(GUESTS_OUT)/$$name.wasm | cut -d' ' -f1)  $(GUESTS_OUT)/$$name.wasm"; done

# The standalone node (docs/latentd.md): with no NODE_FLAGS, the embedded
# demonstration on 127.0.0.1:8080, printing a curl line that calls it.
# cmd/latentd is a module of its own (it needs the edge module); go.work
# makes `go run ./cmd/latentd` work from the root.
node:
	$(GO) run ./cmd/latentd $(NODE_FLAGS)

# The fleet (docs/fleet.md): one etcd (Debian's etcd-server,
# /usr/bin/etcd) and three latentd nodes on loopback, acme fleet-limited,
# clients holding acme's guest on every node; each second each node's
# slice and live count, the fleet total and the limit. FLEET_FLAGS:
# -nodes, -limit, -clients, -duration, -requests, -v. Ctrl-C stops it all.
fleet:
	$(GO) run ./cmd/latentd fleet-demo $(FLEET_FLAGS)

# An in-process latentd soaked over loopback: a bounded request loop
# (SOAK_FLAGS: -requests, -duration, -concurrency), HTTP status counts,
# latency percentiles and the node's invariants (edge/soak, which
# make stress STRESS_FLAGS=-http runs too).
soak-http:
	$(GO) run ./cmd/latentd soak $(SOAK_FLAGS)

# The cost of an invocation (docs/latentd.md): bench-invoke runs the
# loopback invocation benchmark (a real latentd, the demonstration guest,
# allocs/op), and the bare handler's (edge/bench/barewasm) under the
# same client; compare-edge runs wrk against latentd and against the bare
# wazero handler (edge/bench/barewasm) in interleaved rounds and prints
# the ratio of their median requests/s (needs wrk).
bench-invoke:
	cd edge && $(GO) test -run='^$$' -bench='^BenchmarkBareLoopback$$' -benchmem -benchtime=2s -count=$(INVOKECOUNT) ./bench/barewasm
	cd edge && $(GO) test -run='^$$' -bench='^BenchmarkInvokeLoopback$$' -benchmem -benchtime=2s -count=$(INVOKECOUNT) ./latentd

INVOKECOUNT ?= 3

compare-edge:
	bench/compare/compare-edge.sh
