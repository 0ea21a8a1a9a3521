package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
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
	// Text is the mutated line, trimmed, and TextColumn the operator's
	// column within it (see locate).
	Text       string
	TextColumn int
}

// Anchor is what an entry of the list of equivalent mutants must match:
// the file, the mutator, the column within the trimmed line and its text.
func (m Mutant) Anchor() string {
	return anchor(m.File, m.Type, m.TextColumn, m.Text)
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
//
// An entry names what the mutant changes, not where it sits: the file,
// the mutator, the text of the mutated line with its leading and
// trailing blanks trimmed, and the operator's column within that
// trimmed text (which tells apart two mutants on one line). Lines
// inserted or removed above it, or a new indentation, leave it matched;
// an edit of the line itself makes it stale.
type Equivalent struct {
	File    string // slash-separated, relative to the module root
	Type    string // the mutator
	Column  int    // 1-based, in bytes, within Text
	Text    string // the mutated line, trimmed
	Reason  string
	Line    int // of the entry in the list, for messages
	matched bool
}

// Key is how an entry is told apart: the same key as its mutants'
// [Mutant.Anchor].
func (e Equivalent) Key() string {
	return anchor(e.File, e.Type, e.Column, e.Text)
}

// Name is how messages name an entry: its file, mutator, column and
// line text, as the list spells them.
func (e Equivalent) Name() string {
	return fmt.Sprintf("%s %s %d %s", e.File, e.Type, e.Column, strconv.Quote(e.Text))
}

func anchor(file, mutator string, column int, text string) string {
	return file + "\x00" + mutator + "\x00" + strconv.Itoa(column) + "\x00" + text
}

// parseEquivalents reads the list of known-equivalent mutants: one entry
// a line,
//
//	file MUTATOR column "trimmed line text" — reason
//
// where the text is a Go string literal and column counts bytes within
// it from 1. Blank lines and lines starting with # are ignored. Every
// entry needs a reason, and its column must fall inside its text.
func parseEquivalents(r io.Reader) (map[string]*Equivalent, error) {
	const want = `want: file MUTATOR column "trimmed line text" — reason`
	list := map[string]*Equivalent{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.SplitN(text, " ", 4)
		if len(fields) < 4 || fields[0] == "" || fields[1] == "" {
			return nil, fmt.Errorf("line %d: %s", n, want)
		}
		col, err := strconv.Atoi(fields[2])
		if err != nil || col <= 0 {
			return nil, fmt.Errorf("line %d: column %q is not a positive number; %s", n, fields[2], want)
		}
		quoted, err := strconv.QuotedPrefix(fields[3])
		if err != nil {
			return nil, fmt.Errorf("line %d: the line text is not a quoted Go string; %s", n, want)
		}
		line, _ := strconv.Unquote(quoted)
		rest := strings.TrimSpace(fields[3][len(quoted):])
		reason, ok := strings.CutPrefix(rest, "—")
		reason = strings.TrimSpace(reason)
		if !ok || reason == "" {
			return nil, fmt.Errorf("line %d: no \"— reason\" after the line text; %s", n, want)
		}
		if line != strings.TrimSpace(line) || line == "" {
			return nil, fmt.Errorf("line %d: the line text must be trimmed and not empty", n)
		}
		if col > len(line) {
			return nil, fmt.Errorf("line %d: column %d is past the end of the line text (%d bytes)", n, col, len(line))
		}
		e := &Equivalent{File: fields[0], Type: fields[1], Column: col, Text: line, Reason: reason, Line: n}
		if first, dup := list[e.Key()]; dup {
			return nil, fmt.Errorf("line %d: %s is already listed at line %d", n, e.Name(), first.Line)
		}
		list[e.Key()] = e
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return list, nil
}

// locate fills in each mutant's line text and its column within it from
// the files under root. A mutant whose line cannot be read keeps an
// empty text, which no entry matches.
func locate(root string, mutants []Mutant) error {
	files := map[string][]string{}
	for i := range mutants {
		m := &mutants[i]
		lines, ok := files[m.File]
		if !ok {
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
			if err != nil {
				return err
			}
			lines = strings.Split(string(data), "\n")
			files[m.File] = lines
		}
		if m.Line < 1 || m.Line > len(lines) {
			continue
		}
		raw := strings.TrimRight(lines[m.Line-1], "\r")
		indent := len(raw) - len(strings.TrimLeft(raw, " \t"))
		m.Text = strings.TrimSpace(raw)
		m.TextColumn = m.Column - indent
	}
	return nil
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

// score classifies the mutants of package dir pkg against the list;
// their texts must have been located. An entry in pkg that no surviving
// mutant matches is stale: its line was edited or removed, or a test
// now kills the mutant.
func score(pkg string, mutants []Mutant, equivalents map[string]*Equivalent) (*Score, error) {
	s := &Score{Package: pkg}
	for _, e := range equivalents {
		e.matched = false
	}
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
			if e, ok := equivalents[m.Anchor()]; ok {
				s.Equivalent = append(s.Equivalent, m)
				e.matched = true
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
		if s.NotRun == 0 && path.Dir(e.File) == pkg && !e.matched {
			s.Stale = append(s.Stale, *e)
		}
	}
	sort.Slice(s.Stale, func(i, j int) bool { return s.Stale[i].Line < s.Stale[j].Line })
	return s, nil
}
