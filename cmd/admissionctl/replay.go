package main

import (
	"fmt"
	"io"
	"os"

	"latent.dev/admission/internal/scenario"
	"latent.dev/admission/internal/strictjson"
)

func init() {
	commands["replay"] = runReplay
}

// runReplay runs scenario files and prints one JSON line per step. With
// --check it compares every step with its expect and exits 1 on any
// mismatch; -q leaves out the JSON lines.
func runReplay(args []string, stdout, stderr io.Writer) int {
	check, quiet := false, false
	var files []string
	for _, a := range args {
		switch a {
		case "--check", "-check":
			check = true
		case "-q", "--quiet":
			quiet = true
		default:
			if len(a) > 1 && a[0] == '-' {
				fmt.Fprintf(stderr, "admissionctl replay: unknown flag %s\n", a)
				return 2
			}
			files = append(files, a)
		}
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, "usage: admissionctl replay [--check] [-q] FILE...")
		return 2
	}
	failed := false
	for _, file := range files {
		if !replayFile(file, check, quiet, stdout, stderr) {
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

func replayFile(file string, check, quiet bool, stdout, stderr io.Writer) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return false
	}
	s, err := scenario.Decode(data)
	if err != nil {
		for _, p := range strictjson.AsProblems(err) {
			fmt.Fprintf(stderr, "%s: %s\n", file, p)
		}
		return false
	}
	results, err := s.Run()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", file, err)
		return false
	}
	mismatches := 0
	for _, res := range results {
		if !quiet {
			fmt.Fprintln(stdout, scenario.MarshalLine(res))
		}
		if !check {
			continue
		}
		for _, m := range res.Mismatches {
			mismatches++
			fmt.Fprintf(stderr, "%s: step %d (%s): %s\n", file, res.Index, res.Op, m)
		}
	}
	if check {
		if mismatches > 0 {
			fmt.Fprintf(stderr, "FAIL %s: %d mismatches in %d steps\n", file, mismatches, len(results))
			return false
		}
		fmt.Fprintf(stderr, "ok   %s (%d steps)\n", file, len(results))
	}
	return true
}
