// Command scaling runs BenchmarkParallel (workloads valid, spread, flood
// and reject) at -cpu 1, 2, 4, 8 and 16, capped at the cores this process
// may use, and prints valid admissions/s and rejections/s per workload and
// core count, with each count's ratio to -cpu 1. `make scaling` runs it.
//
// One test binary is built, then run -rounds times over (6 by default),
// each run covering every -cpu value in turn, so that -cpu 1 and -cpu 2
// are interleaved and a slow spell of a shared machine spreads over both
// instead of skewing one ratio. The table shows the median of the rounds.
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
	"sort"
	"strconv"
	"strings"
)

// line matches one result, e.g.
// BenchmarkParallel/workload=flood/impl=ledger-2  100000  205.2 ns/op  490000 valid-admits/s  4400000 rejections/s
var line = regexp.MustCompile(`^BenchmarkParallel/workload=(\w+)/impl=(\w+)(?:-(\d+))?\s+\d+\s+[\d.]+ ns/op(.*)$`)

var metric = regexp.MustCompile(`([\d.e+]+) (valid-admits/s|rejections/s)`)

// workloads is the order the table lists them in.
var workloads = map[string]int{"valid": 0, "spread": 1, "flood": 2, "reject": 3}

func main() {
	benchtime := flag.String("benchtime", "500ms", "-benchtime of each run")
	rounds := flag.Int("rounds", 6, "runs over every -cpu value; the table shows the median")
	impls := flag.String("impl", "ledger", "regexp of the implementations to run (ledger, naive)")
	flag.Parse()
	if *rounds < 1 {
		fmt.Fprintln(os.Stderr, "scaling: -rounds must be at least 1")
		os.Exit(2)
	}
	cores := runtime.NumCPU()
	var cpus []string
	for _, n := range []int{1, 2, 4, 8, 16} {
		if n <= cores {
			cpus = append(cpus, strconv.Itoa(n))
		}
	}
	if cores < 16 {
		fmt.Printf("this machine has %d cores: -cpu is capped at %s\n", cores, cpus[len(cpus)-1])
	}
	dir, err := os.MkdirTemp("", "scaling")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(dir)
	binary := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", binary, "./bench")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fail("go test -c: %v", err)
	}
	type key struct {
		workload, impl, metric string
		cpu                    int
	}
	samples := map[key][]float64{}
	for round := 1; round <= *rounds; round++ {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", round, *rounds)
		run := exec.Command(binary, "-test.run=^$", "-test.bench=^BenchmarkParallel$/^workload=/^impl=("+*impls+")$",
			"-test.benchtime="+*benchtime, "-test.count=1", "-test.cpu="+strings.Join(cpus, ","))
		run.Dir = "bench" // the benchmarks read ../testdata
		run.Stderr = os.Stderr
		out, err := run.Output()
		if err != nil {
			fail("the benchmark: %v\n%s", err, out)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			m := line.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			cpu := 1
			if m[3] != "" {
				cpu, _ = strconv.Atoi(m[3])
			}
			for _, mm := range metric.FindAllStringSubmatch(m[4], -1) {
				if v, err := strconv.ParseFloat(mm[1], 64); err == nil {
					k := key{m[1], m[2], mm[2], cpu}
					samples[k] = append(samples[k], v)
				}
			}
		}
	}
	if len(samples) == 0 {
		fail("no results in the benchmark output")
	}
	fmt.Printf("\nmedians of %d interleaved rounds, -benchtime %s; x: against -cpu 1\n", *rounds, *benchtime)
	fmt.Printf("%-8s %-7s %-16s", "workload", "impl", "metric")
	for _, c := range cpus {
		fmt.Printf(" %12s", "-cpu "+c)
		if c != "1" {
			fmt.Printf(" %6s", "x")
		}
	}
	fmt.Println()
	var keys []key
	for k := range samples {
		if k.cpu == 1 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.workload != b.workload {
			return workloads[a.workload] < workloads[b.workload]
		}
		if a.impl != b.impl {
			return a.impl < b.impl
		}
		return a.metric > b.metric
	})
	for _, k := range keys {
		fmt.Printf("%-8s %-7s %-16s", k.workload, k.impl, k.metric)
		one := median(samples[k])
		for _, c := range cpus {
			n, _ := strconv.Atoi(c)
			k.cpu = n
			v := median(samples[k])
			fmt.Printf(" %12s", human(v))
			if n != 1 {
				fmt.Printf(" %5.2fx", v/one)
			}
		}
		fmt.Println()
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scaling: "+format+"\n", args...)
	os.Exit(1)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func human(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	default:
		return fmt.Sprintf("%.0fk/s", v/1e3)
	}
}
