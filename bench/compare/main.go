// Command compare measures the working tree against a named commit: it
// builds the bench package's test binary at -base (in a temporary git
// worktree, removed afterwards) and in the working tree, then runs both,
// interleaved family by family, -rounds times over: the single-goroutine benchmarks
// (Clock, Cycle, Reject, CriticalSection) at -cpu 1, pinned to one core
// with taskset when it is there, and BenchmarkParallel at -cpu 2. It
// prints each benchmark's median ns/op and allocs/op at base and head,
// the ratio head/base, the single-goroutine benchmarks' CPU time per
// operation (see measureCPU), and the medians of the figures the
// benchmarks report themselves (admits/s, rejections/s, bound-cycles/s)
// with their ratio. Only the ledger's rows run (impl=ledger). `make compare
// BASE=<commit>` runs it.
//
// Every speed claim is such a comparison with a named commit: a ratio
// against another implementation moves with the host.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The benchmark runs, as -test.bench patterns (one part per level of
// names; a pattern with more parts than a benchmark has levels would not
// report it, hence one run per family): the single-goroutine ones run at
// -cpu 1 pinned, the parallel one at -cpu 2.
var (
	single   = []string{`^BenchmarkClock$`, `^BenchmarkCycle$/^impl=ledger$`, `^BenchmarkReject$//^impl=ledger$`, `^BenchmarkCriticalSection$`}
	parallel = []string{`^BenchmarkParallel$/^workload=/^impl=ledger$`}
)

// result matches one result line, e.g.
// BenchmarkReject/capacity/impl=ledger  4000000  292.0 ns/op  0 B/op  0 allocs/op
// BenchmarkParallel/workload=flood/impl=ledger-2  100000  205.2 ns/op  490000 valid-admits/s  4400000 rejections/s  ...
var result = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// figure matches one "value unit" pair of a result line.
var figure = regexp.MustCompile(`([\d.e+-]+) (\S+)`)

func main() {
	base := flag.String("base", "", "the commit to compare the working tree with (required)")
	rounds := flag.Int("rounds", 6, "interleaved runs of each binary; the table shows the medians")
	benchtime := flag.String("benchtime", "1s", "-benchtime of each benchmark")
	flag.Parse()
	if *base == "" || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "usage: compare -base COMMIT [-rounds N] [-benchtime D]")
		os.Exit(2)
	}
	commit, err := output("git", "rev-parse", "--short", *base+"^{commit}")
	if err != nil {
		fail("%s is not a commit: %v", *base, err)
	}
	head, _ := output("git", "rev-parse", "--short", "HEAD")
	if dirty, _ := output("git", "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		head += "+changes"
	}
	dir, err := os.MkdirTemp("", "compare")
	if err != nil {
		fail("%v", err)
	}
	tree := filepath.Join(dir, "base")
	if err := run("", "git", "worktree", "add", "--detach", "--quiet", tree, commit); err != nil {
		os.RemoveAll(dir)
		fail("git worktree add: %v", err)
	}
	defer func() {
		if err := run("", "git", "worktree", "remove", "--force", tree); err != nil {
			fmt.Fprintf(os.Stderr, "compare: git worktree remove %s: %v\n", tree, err)
		}
		os.RemoveAll(dir)
	}()
	bins := []binary{
		{name: "base", dir: filepath.Join(tree, "bench"), path: filepath.Join(dir, "base.test")},
		{name: "head", dir: "bench", path: filepath.Join(dir, "head.test")},
	}
	if err := measure(bins, commit, head, *rounds, *benchtime); err != nil {
		fmt.Fprintf(os.Stderr, "compare: %v\n", err)
		defer os.Exit(1) // after the worktree is removed
	}
}

// measure builds both binaries, runs them and prints the tables.
func measure(bins []binary, commit, head string, rounds int, benchtime string) error {
	for _, b := range bins {
		root := filepath.Dir(b.dir)
		fmt.Fprintf(os.Stderr, "building the %s benchmarks in %s\n", b.name, root)
		if err := run(root, "go", "test", "-c", "-o", b.path, "./bench"); err != nil {
			return fmt.Errorf("go test -c (%s): %v", b.name, err)
		}
	}
	pin := pinning()
	samples := map[string]map[string]map[string][]float64{} // benchmark, binary, unit
	var order []string
	type set struct {
		pattern, cpu string
		pin          []string
	}
	var sets []set
	for _, p := range single {
		sets = append(sets, set{p, "1", pin})
	}
	for _, p := range parallel {
		sets = append(sets, set{p, "2", nil})
	}
	for round := 1; round <= rounds; round++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", round, rounds)
		for k, set := range sets {
			// Base and head run each family back to back, so that a slow
			// spell of a shared machine lands on both; which goes first
			// alternates.
			pair := bins
			if (round+k)%2 == 0 {
				pair = []binary{bins[1], bins[0]}
			}
			for _, b := range pair {
				args := append(append([]string{}, set.pin...), b.path, "-test.run=^$", "-test.bench="+set.pattern,
					"-test.benchmem", "-test.benchtime="+benchtime, "-test.count=1", "-test.cpu="+set.cpu)
				cmd := exec.Command(args[0], args[1:]...)
				cmd.Dir = b.dir // the benchmarks read ../testdata
				cmd.Stderr = os.Stderr
				out, err := cmd.Output()
				if err != nil {
					return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
				}
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					m := result.FindStringSubmatch(sc.Text())
					if m == nil {
						continue
					}
					name := m[1]
					if samples[name] == nil {
						samples[name] = map[string]map[string][]float64{}
						order = append(order, name)
					}
					if samples[name][b.name] == nil {
						samples[name][b.name] = map[string][]float64{}
					}
					for _, f := range figure.FindAllStringSubmatch(m[2], -1) {
						v, err := strconv.ParseFloat(f[1], 64)
						if err == nil {
							samples[name][b.name][f[2]] = append(samples[name][b.name][f[2]], v)
						}
					}
				}
			}
		}
	}
	cpu, err := measureCPU(bins, order, samples, pin, rounds)
	if err != nil {
		return err
	}
	fmt.Printf("base %s, head %s; %d interleaved rounds, medians; %s, %s/%s\n", commit, head, rounds, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("single-goroutine benchmarks at -cpu 1%s; BenchmarkParallel at -cpu 2, unpinned\n\n", pinNote(pin))
	fmt.Printf("%-52s %12s %12s %7s %14s\n", "benchmark (wall time)", "base ns/op", "head ns/op", "head/base", "allocs b/h")
	for _, name := range order {
		b, h := samples[name]["base"], samples[name]["head"]
		fmt.Printf("%-52s %12s %12s %7s %14s\n", name, num(median(b["ns/op"])), num(median(h["ns/op"])),
			ratio(median(h["ns/op"]), median(b["ns/op"])), num(median(b["allocs/op"]))+"/"+num(median(h["allocs/op"])))
	}
	fmt.Printf("\n%-52s %12s %12s %7s %12s %12s %7s\n", "benchmark (CPU time, pinned)", "base ns/op", "head ns/op", "head/base",
		"base min", "head min", "min/min")
	for _, name := range order {
		if c := cpu[name]; c != nil {
			b, h := c["base"], c["head"]
			fmt.Printf("%-52s %12s %12s %7s %12s %12s %7s\n", name, num(median(b)), num(median(h)), ratio(median(h), median(b)),
				num(lowest(b)), num(lowest(h)), ratio(lowest(h), lowest(b)))
		}
	}
	fmt.Printf("\n%-52s %-16s %14s %14s %7s\n", "benchmark", "figure", "base", "head", "head/base")
	for _, name := range order {
		var units []string
		for unit := range samples[name]["head"] {
			if strings.HasSuffix(unit, "/s") {
				units = append(units, unit)
			}
		}
		sort.Strings(units)
		for _, unit := range units {
			b, h := median(samples[name]["base"][unit]), median(samples[name]["head"][unit])
			fmt.Printf("%-52s %-16s %14s %14s %7s\n", name, unit, num(b), num(h), ratio(h, b))
		}
	}
	return nil
}

// measureCPU times each single-goroutine benchmark by the CPU time its
// process spends (user plus system, every thread, the collector's
// included) over a fixed number of iterations, less a run of one
// iteration (the setup), divided by the count. On a shared machine a
// process that waits for a core adds to its wall time, not to its CPU
// time, so this figure moves less with the other work of the host. Each
// benchmark runs on its own, pinned, base and head back to back, rounds
// times; the count is what takes about half a second at head's wall time.
// The table shows each side's median and its lowest sample.
func measureCPU(bins []binary, order []string, samples map[string]map[string]map[string][]float64, pin []string, rounds int) (map[string]map[string][]float64, error) {
	cpu := map[string]map[string][]float64{}
	for round := 1; round <= rounds; round++ {
		fmt.Fprintf(os.Stderr, "CPU time, round %d of %d\n", round, rounds)
		for k, name := range order {
			if strings.HasPrefix(name, "BenchmarkParallel") {
				continue
			}
			ns := median(samples[name]["head"]["ns/op"])
			if ns <= 0 {
				continue
			}
			n := max(int64(0.5e9/ns), 1000)
			var parts []string
			for _, p := range strings.Split(name, "/") {
				parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
			}
			pattern := strings.Join(parts, "/")
			pair := bins
			if (round+k)%2 == 0 {
				pair = []binary{bins[1], bins[0]}
			}
			for _, b := range pair {
				var spent [2]float64
				for i, iterations := range []int64{1, n} {
					args := append(append([]string{}, pin...), b.path, "-test.run=^$", "-test.bench="+pattern,
						"-test.benchtime="+strconv.FormatInt(iterations, 10)+"x", "-test.count=1", "-test.cpu=1")
					cmd := exec.Command(args[0], args[1:]...)
					cmd.Dir = b.dir
					cmd.Stderr = os.Stderr
					if out, err := cmd.Output(); err != nil {
						return nil, fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
					}
					st := cmd.ProcessState
					spent[i] = float64(st.UserTime() + st.SystemTime())
				}
				if cpu[name] == nil {
					cpu[name] = map[string][]float64{}
				}
				cpu[name][b.name] = append(cpu[name][b.name], (spent[1]-spent[0])/float64(n))
			}
		}
	}
	return cpu, nil
}

type binary struct{ name, dir, path string }

// pinning is the command prefix that pins a run to the last core.
func pinning() []string {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil
	}
	return []string{"taskset", "-c", strconv.Itoa(runtime.NumCPU() - 1)}
}

func pinNote(pin []string) string {
	if pin == nil {
		return " (unpinned: no taskset)"
	}
	return ", pinned with " + strings.Join(pin, " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// lowest is the smallest sample: the run the host's other work disturbed
// least.
func lowest(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	return slices.Min(v)
}

func num(v float64) string {
	switch {
	case v < 0:
		return "-"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 3, 64) + "M"
	case v >= 100 || v == float64(int64(v)):
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func ratio(head, base float64) string {
	if head < 0 || base <= 0 {
		return "-"
	}
	return strconv.FormatFloat(head/base, 'f', 2, 64) + "x"
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return strings.TrimSpace(string(out)), err
}

func run(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
	os.Exit(1)
}
