package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Mutant is one mutation gremlins reported, located from the module root.
type Mutant struct {
	File   string // slash-separated, relative to the module root
	Line   int
	Column int
	Type   string // gremlins' name, such as CONDITIONALS_BOUNDARY
	Status string // gremlins' status, such as LIVED or KILLED
}

// Key is how the list of equivalent mutants names a mutant.
func (m Mutant) Key() string {
	return fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Column, m.Type)
}

// The gremlins statuses the score distinguishes.
const (
	statusKilled     = "KILLED"
	statusTimedOut   = "TIMED OUT"
	statusLived      = "LIVED"
	statusNotCovered = "NOT COVERED"
	statusNotViable  = "NOT VIABLE"
	statusSkipped    = "SKIPPED"
	statusRunnable   = "RUNNABLE" // found but not run: gremlins --dry-run
)

// gremlinsOutput is the part of gremlins' -o file that is read.
type gremlinsOutput struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// parseGremlins reads gremlins' machine-readable results for a run on
// package dir pkg, whose file names are relative to pkg.
func parseGremlins(r io.Reader, pkg string) ([]Mutant, error) {
	var out gremlinsOutput
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading gremlins results: %w", err)
	}
	var mutants []Mutant
	for _, f := range out.Files {
		for _, m := range f.Mutations {
			mutants = append(mutants, Mutant{File: path.Join(pkg, f.Name), Line: m.Line, Column: m.Column, Type: m.Type, Status: m.Status})
		}
	}
	sort.Slice(mutants, func(i, j int) bool {
		a, b := mutants[i], mutants[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Type < b.Type
	})
	return mutants, nil
}

// Equivalent is one entry of the list of known-equivalent mutants: a
// mutant that changes no behavior the contract fixes, with the reason.
type Equivalent struct {
	Key    string // as Mutant.Key
	File   string
	Reason string
	Line   int // of the entry in the list, for messages
}

// parseEquivalents reads the list of known-equivalent mutants: one entry
// a line, "file:line:col MUTATOR — reason"; blank lines and lines
// starting with # are ignored. Every entry needs a reason.
func parseEquivalents(r io.Reader) (map[string]Equivalent, error) {
	list := map[string]Equivalent{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) < 4 || fields[2] != "—" {
			return nil, fmt.Errorf("line %d: want \"file:line:col MUTATOR — reason\"", n)
		}
		loc := strings.Split(fields[0], ":")
		if len(loc) != 3 || loc[0] == "" {
			return nil, fmt.Errorf("line %d: location %q is not file:line:col", n, fields[0])
		}
		for _, num := range loc[1:] {
			if v, err := strconv.Atoi(num); err != nil || v <= 0 {
				return nil, fmt.Errorf("line %d: location %q is not file:line:col", n, fields[0])
			}
		}
		e := Equivalent{Key: fields[0] + " " + fields[1], File: loc[0], Reason: strings.Join(fields[3:], " "), Line: n}
		if first, dup := list[e.Key]; dup {
			return nil, fmt.Errorf("line %d: %s is already listed at line %d", n, e.Key, first.Line)
		}
		list[e.Key] = e
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return list, nil
}

// Score is one package's result.
type Score struct {
	Package    string
	Killed     int // killed, timed-out runs included
	TimedOut   int
	NotViable  int // did not compile; not counted
	NotRun     int // found by a dry run; not counted
	Equivalent []Mutant
	// Survivors are the mutants that no test failed on, covered or not,
	// and that the list does not call equivalent.
	Survivors []Mutant
	// Stale are entries of the list, in this package, that name no
	// surviving mutant: the code moved or a test now kills it.
	Stale []Equivalent
}

// Percent is killed / (killed + non-equivalent survivors), or 100 when
// there is nothing to count.
func (s *Score) Percent() float64 {
	if s.Killed+len(s.Survivors) == 0 {
		return 100
	}
	return 100 * float64(s.Killed) / float64(s.Killed+len(s.Survivors))
}

// score classifies the mutants of package dir pkg against the list.
func score(pkg string, mutants []Mutant, equivalents map[string]Equivalent) (*Score, error) {
	s := &Score{Package: pkg}
	surviving := map[string]bool{}
	for _, m := range mutants {
		switch m.Status {
		case statusKilled:
			s.Killed++
		case statusTimedOut:
			s.Killed++
			s.TimedOut++
		case statusNotViable:
			s.NotViable++
		case statusLived, statusNotCovered:
			if _, ok := equivalents[m.Key()]; ok {
				s.Equivalent = append(s.Equivalent, m)
				surviving[m.Key()] = true
			} else {
				s.Survivors = append(s.Survivors, m)
			}
		case statusRunnable:
			s.NotRun++
		case statusSkipped:
		default:
			return nil, fmt.Errorf("%s: unknown gremlins status %q", m.Key(), m.Status)
		}
	}
	for _, e := range equivalents {
		if s.NotRun == 0 && path.Dir(e.File) == pkg && !surviving[e.Key] {
			s.Stale = append(s.Stale, e)
		}
	}
	sort.Slice(s.Stale, func(i, j int) bool { return s.Stale[i].Line < s.Stale[j].Line })
	return s, nil
}
