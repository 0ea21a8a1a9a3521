// Command stress soaks the admission library: many workers send a
// realistic mix of valid and invalid requests through one provider while
// a sampler flips node load, a deployer replaces catalog deployments under
// held pins, and some permits are abandoned for the GC to reclaim. It
// prints a progress line each second and ends with a report and the
// invariant checks; it exits 1 if any invariant fails.
//
//	go run ./cmd/stress [-duration 10s] [-workers N] [-seed S]
//	                    [-policy FILE] [-catalog FILE]
//	                    [-cpuprofile FILE] [-memprofile FILE] [-pipeline]
//	                    [-load synthetic|psi] [-report FILE.html]
//	go run ./cmd/stress -http [-duration 10s] [-requests N] [-workers N]
//
// With -pipeline the accepted work also runs: through the fair scheduler,
// the fixed cell pool and the runner with a synthetic backend that acts
// out every terminal outcome, and the invariants then cover the
// scheduler's and the pool's counters too.
//
// With -load psi the node's real load sampler (node/loadsampler) reads
// this machine's PSI and cgroup instead of the synthetic samples, and the
// soak prints the sources it used.
//
// With -report the soak also writes its report as one self-contained
// HTML page (inline CSS and SVG charts, nothing fetched): admitted and
// rejected per second, the admit-latency histogram on log-scale buckets,
// rejections by reason, the peak of live reservations against the limits,
// and the resource counts and invariants with a pass or fail mark each.
// The text report is printed as before.
//
// With -http the soak goes over HTTP instead: edge/soak's Run (the code
// `latentd soak` runs) serves the demonstration node in this process on a
// loopback port, and -workers clients send valid invocations and distinct
// rejected targets until -requests were sent or -duration passed. The
// report has the HTTP status counts, latency percentiles and the
// invariants: every request answered, the ledger back to zero, no leaked
// permit, the node's own checks, and this process's goroutines,
// descriptors, sockets, children and threads against a baseline taken
// after a short warm-up soak. cmd/stress is a module of its own
// (cmd/stress/go.mod) because it imports the edge, which the library's
// module must not require.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/policy"
)

//go:embed default-policy.json
var defaultPolicy []byte

//go:embed default-catalog.json
var defaultCatalog []byte

type config struct {
	duration   time.Duration
	workers    int
	seed       uint64
	policyFile string
	catalog    string
	cpuProfile string
	memProfile string
	pipeline   bool
	load       string // loadSynthetic or loadPSI
	report     string // the HTML report's path, or ""
	http       bool   // soak an in-process latentd over loopback
	requests   int    // -http: stop after this many requests
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := flag.NewFlagSet("stress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to soak")
	fs.IntVar(&cfg.workers, "workers", 4*runtime.GOMAXPROCS(0), "concurrent request workers")
	fs.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()), "random seed (printed, so a run can be repeated)")
	fs.StringVar(&cfg.policyFile, "policy", "", "node policy file (default: the embedded one)")
	fs.StringVar(&cfg.catalog, "catalog", "", "catalog file (default: the embedded one)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the soak to FILE")
	fs.StringVar(&cfg.memProfile, "memprofile", "", "write an allocation profile to FILE at the end")
	fs.BoolVar(&cfg.pipeline, "pipeline", false, "soak the full pipeline: admission, scheduler, cell pool and runner")
	fs.StringVar(&cfg.load, "load", loadSynthetic, "load samples: synthetic, or psi for the real sampler over this machine")
	fs.StringVar(&cfg.report, "report", "", "also write the report as a self-contained HTML page to FILE")
	fs.BoolVar(&cfg.http, "http", false, "soak an in-process latentd (the demonstration node) over loopback HTTP")
	fs.IntVar(&cfg.requests, "requests", 100000, "with -http: stop after this many requests (or -duration, whichever comes first)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.http {
		var conflicts []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "pipeline", "report", "policy", "catalog", "load":
				conflicts = append(conflicts, "-"+f.Name)
			}
		})
		if len(conflicts) > 0 {
			fmt.Fprintf(stderr, "stress: -http soaks the demonstration node; %v are for the in-process soaks\n", conflicts)
			return 2
		}
		if cfg.duration <= 0 || cfg.workers <= 0 || cfg.requests <= 0 {
			fmt.Fprintln(stderr, "stress: -duration, -workers and -requests must be positive")
			return 2
		}
	}
	if cfg.load != loadSynthetic && cfg.load != loadPSI {
		fmt.Fprintln(stderr, "stress: -load must be synthetic or psi")
		return 2
	}
	if cfg.report != "" && cfg.pipeline {
		fmt.Fprintln(stderr, "stress: -report is for the admission soak; -pipeline prints its report as text only")
		return 2
	}
	if cfg.duration <= 0 || cfg.workers <= 0 {
		fmt.Fprintln(stderr, "stress: -duration and -workers must be positive")
		return 2
	}
	pol, cat, err := load(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "stress: %v\n", err)
		return 2
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "stress: %v\n", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "stress: %v\n", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.http {
		code := runHTTP(cfg, stdout, stderr)
		if code == 0 && cfg.memProfile != "" {
			if err := writeHeapProfile(cfg.memProfile); err != nil {
				fmt.Fprintf(stderr, "stress: %v\n", err)
				return 2
			}
		}
		return code
	}
	if cfg.pipeline {
		return runPipeline(cfg, pol, cat, stdout)
	}
	s, err := newSoak(cfg, pol, cat, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "stress: %v\n", err)
		return 2
	}
	if cfg.load == loadPSI {
		if s.real, err = s.startRealLoad(nil); err != nil {
			fmt.Fprintf(stderr, "stress: %v\n", err)
			return 2
		}
	}
	rep := s.run()
	rep.print(stdout)
	if cfg.report != "" {
		if err := rep.writeHTML(cfg.report); err != nil {
			fmt.Fprintf(stderr, "stress: -report: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "stress: report written to %s\n", cfg.report)
	}
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			fmt.Fprintf(stderr, "stress: %v\n", err)
			return 2
		}
	}
	if !rep.ok() {
		return 1
	}
	return 0
}

func load(cfg config) (*policy.NodeAdmissionPolicy, catalog.File, error) {
	policyData, catalogData := defaultPolicy, defaultCatalog
	var err error
	if cfg.policyFile != "" {
		if policyData, err = os.ReadFile(cfg.policyFile); err != nil {
			return nil, catalog.File{}, err
		}
	}
	if cfg.catalog != "" {
		if catalogData, err = os.ReadFile(cfg.catalog); err != nil {
			return nil, catalog.File{}, err
		}
	}
	pol, err := policy.DecodePolicy(policyData)
	if err != nil {
		return nil, catalog.File{}, fmt.Errorf("policy:\n%w", err)
	}
	cat, err := catalog.DecodeCatalogFile(catalogData, true)
	if err != nil {
		return nil, catalog.File{}, fmt.Errorf("catalog:\n%w", err)
	}
	return pol, cat, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}
