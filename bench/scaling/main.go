// Command scaling runs BenchmarkParallel at -cpu 1, 2, 4, 8 and 16, capped
// at the cores this process may use, and prints valid admissions/s and
// rejections/s per workload and core count, so that a machine with more
// cores than the development host shows the curve. `make scaling` runs it.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
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

func main() {
	benchtime := flag.String("benchtime", "1s", "go test -benchtime for each run")
	count := flag.Int("count", 3, "runs per point; the table shows the median")
	flag.Parse()
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
	cmd := exec.Command("go", "test", "-run=^$", "-bench=^BenchmarkParallel$", "-benchtime="+*benchtime,
		"-count="+strconv.Itoa(*count), "-cpu="+strings.Join(cpus, ","), "./bench")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scaling: go test: %v\n%s", err, out)
		os.Exit(1)
	}
	type key struct {
		workload, impl, metric string
		cpu                    int
	}
	samples := map[key][]float64{}
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
			v, err := strconv.ParseFloat(mm[1], 64)
			if err == nil {
				k := key{m[1], m[2], mm[2], cpu}
				samples[k] = append(samples[k], v)
			}
		}
	}
	if len(samples) == 0 {
		fmt.Fprintf(os.Stderr, "scaling: no results in the benchmark output:\n%s", out)
		os.Exit(1)
	}
	fmt.Printf("\n%-8s %-7s %-16s", "workload", "impl", "metric")
	for _, c := range cpus {
		fmt.Printf(" %12s", "-cpu "+c)
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
			return a.workload < b.workload
		}
		if a.impl != b.impl {
			return a.impl < b.impl
		}
		return a.metric < b.metric
	})
	for _, k := range keys {
		fmt.Printf("%-8s %-7s %-16s", k.workload, k.impl, k.metric)
		for _, c := range cpus {
			n, _ := strconv.Atoi(c)
			k.cpu = n
			fmt.Printf(" %12s", human(median(samples[k])))
		}
		fmt.Println()
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
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
