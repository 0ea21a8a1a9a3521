// Command top prints the heaviest functions of pprof profiles, by flat
// and cumulative value, using github.com/google/pprof/profile.
//
//	go run ./profiles/top [-n 15] FILE.prof...
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/google/pprof/profile"
)

func main() {
	n := flag.Int("n", 15, "functions to print per profile")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: top [-n N] FILE.prof...")
		os.Exit(2)
	}
	failed := false
	for _, file := range flag.Args() {
		if err := printTop(os.Stdout, file, *n); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

type row struct {
	name      string
	flat, cum int64
}

func printTop(w io.Writer, file string, n int) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return err
	}
	// The value to rank by: the last sample type (cpu nanoseconds for a
	// CPU profile; for an allocation profile, prefer alloc_space).
	index := len(p.SampleType) - 1
	for i, st := range p.SampleType {
		if st.Type == "alloc_space" {
			index = i
		}
	}
	rows, total := summarize(p, index)
	unit := p.SampleType[index]
	fmt.Fprintf(w, "%s: %s (%s), total %d\n", file, unit.Type, unit.Unit, total)
	fmt.Fprintf(w, "%8s %6s %8s %6s  %s\n", "flat", "flat%", "cum", "cum%", "function")
	for i, r := range rows {
		if i == n {
			break
		}
		fmt.Fprintf(w, "%8d %5.1f%% %8d %5.1f%%  %s\n", r.flat, pct(r.flat, total), r.cum, pct(r.cum, total), r.name)
	}
	fmt.Fprintln(w)
	return nil
}

// summarize adds each sample's value to its leaf function (flat) and,
// once per sample, to every function on its stack (cumulative).
func summarize(p *profile.Profile, index int) ([]row, int64) {
	byName := map[string]*row{}
	get := func(name string) *row {
		r, ok := byName[name]
		if !ok {
			r = &row{name: name}
			byName[name] = r
		}
		return r
	}
	var total int64
	for _, s := range p.Sample {
		v := s.Value[index]
		total += v
		seen := map[string]bool{}
		for li, loc := range s.Location {
			for lj, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if li == 0 && lj == 0 {
					get(name).flat += v
				}
				if !seen[name] {
					seen[name] = true
					get(name).cum += v
				}
			}
		}
	}
	rows := make([]row, 0, len(byName))
	for _, r := range byName {
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].flat != rows[j].flat {
			return rows[i].flat > rows[j].flat
		}
		return rows[i].name < rows[j].name
	})
	return rows, total
}

func pct(v, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(v) / float64(total)
}
