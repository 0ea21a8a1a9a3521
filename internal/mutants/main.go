// Command mutants runs mutation testing (github.com/go-gremlins/gremlins)
// on packages of this module, one package at a time, and scores each:
//
//	score = killed / (killed + surviving mutants not known to be equivalent)
//
// A surviving mutant is one that every test of its package passed with,
// or that no test reached. The known-equivalent mutants are listed in a
// file, one a line with the reason it changes no behavior the contract
// fixes; the survivors not in it are printed with their source line.
//
//	go run ./internal/mutants -gremlins CMD [-flags FLAGS] [-equivalent FILE] [-min 95] DIR...
//
// make mutants runs it with the pinned gremlins version.
//
// Each DIR is a package folder relative to the module root; only its own
// files are mutated, not those of packages below it. Gremlins tests only
// mutants inside a block of the coverage profile, which leaves out case
// expressions and constant declarations; this command tests those itself,
// the same way: it applies gremlins' token change and runs the package's
// tests. Every mutant is tested in a copy of the module under the
// temporary folder, so the working tree is never changed. The exit status is 1 when a package
// scores below -min or the list names a mutant that no longer survives.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	gremlins := flag.String("gremlins", "", "command that runs gremlins, split at spaces (make mutants passes the pinned version)")
	flags := flag.String("flags", "--workers 1 --timeout-coefficient 10", "flags for gremlins unleash (split at spaces)")
	equivalentFile := flag.String("equivalent", "testdata/mutants-equivalent.txt", "list of known-equivalent mutants, relative to the module root")
	minimum := flag.Float64("min", 95, "lowest acceptable score, in percent")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mutants -gremlins CMD [-flags FLAGS] [-equivalent FILE] [-min PERCENT] DIR...")
		os.Exit(2)
	}
	if strings.TrimSpace(*gremlins) == "" {
		fatal(fmt.Errorf("no -gremlins command; run make mutants, which pins the version"))
	}
	root, err := moduleRoot()
	if err != nil {
		fatal(err)
	}
	equivalents, err := readEquivalents(filepath.Join(root, *equivalentFile))
	if err != nil {
		fatal(err)
	}
	failed := false
	var scores []*Score
	for _, pkg := range flag.Args() {
		pkg = filepath.ToSlash(filepath.Clean(pkg))
		fmt.Printf("mutants: %s: running gremlins\n", pkg)
		mutants, err := runGremlins(root, pkg, strings.Fields(*gremlins), strings.Fields(*flags))
		if err != nil {
			fatal(fmt.Errorf("%s: %w", pkg, err))
		}
		if err := retestUncovered(root, pkg, mutants); err != nil {
			fatal(fmt.Errorf("%s: %w", pkg, err))
		}
		if err := locate(root, mutants); err != nil {
			fatal(fmt.Errorf("%s: %w", pkg, err))
		}
		s, err := score(pkg, mutants, equivalents)
		if err != nil {
			fatal(err)
		}
		report(os.Stdout, s)
		scores = append(scores, s)
		if s.Percent() < *minimum || len(s.Stale) > 0 {
			failed = true
		}
	}
	fmt.Println("mutants: scores (killed / (killed + non-equivalent survivors)):")
	for _, s := range scores {
		fmt.Printf("  %-20s %6.2f%%  %d killed, %d non-equivalent survivors, %d equivalent\n",
			s.Package, s.Percent(), s.Killed, len(s.Survivors), len(s.Equivalent))
	}
	if failed {
		fmt.Printf("mutants: FAIL: a score is below %.0f%% or the equivalent list is stale\n", *minimum)
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(2)
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(mod), nil
}

func readEquivalents(file string) (map[string]*Equivalent, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	list, err := parseEquivalents(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return list, nil
}

// runGremlins runs gremlins on package dir pkg and returns its mutants.
func runGremlins(root, pkg string, command, flags []string) ([]Mutant, error) {
	tmp, err := os.MkdirTemp("", "mutants-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	results := filepath.Join(tmp, "results.json")
	args := append(command[1:], "unleash")
	args = append(args, flags...)
	// Files in folders below pkg belong to other packages: the regexp is
	// matched against paths relative to pkg.
	args = append(args, "--exclude-files", "/", "--output", results, filepath.Join(root, filepath.FromSlash(pkg)))
	cmd := exec.Command(command[0], args...)
	cmd.Dir = root
	// Gremlins times each mutant's tests against a multiple of the first,
	// coverage, run; a cached result would make that limit far too short.
	cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -count=1"))
	var log bytes.Buffer
	cmd.Stdout = &log
	cmd.Stderr = &log
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(log.Bytes())
		return nil, fmt.Errorf("gremlins: %w", err)
	}
	f, err := os.Open(results)
	if err != nil {
		os.Stderr.Write(log.Bytes())
		return nil, fmt.Errorf("gremlins wrote no results: %w", err)
	}
	defer f.Close()
	return parseGremlins(f, pkg)
}

func report(w io.Writer, s *Score) {
	fmt.Fprintf(w, "mutants: %s: score %.2f%%: %d killed (%d by timeout), %d non-equivalent survivors, %d equivalent, %d not viable\n",
		s.Package, s.Percent(), s.Killed, s.TimedOut, len(s.Survivors), len(s.Equivalent), s.NotViable)
	if s.NotRun > 0 {
		fmt.Fprintf(w, "mutants: %s: %d mutants found but not run (a dry run)\n", s.Package, s.NotRun)
	}
	for _, m := range s.Survivors {
		fmt.Fprintf(w, "  %-11s %s\n              %s\n              as a list entry: %s %s %d %s — REASON\n",
			m.Status, m.Key(), m.Text, m.File, m.Type, m.TextColumn, strconv.Quote(m.Text))
	}
	for _, e := range s.Stale {
		fmt.Fprintf(w, "  STALE       %s (list line %d): no surviving mutant matches it; its line was edited or removed, or a test now kills it; update the list\n", e.Name(), e.Line)
	}
}
