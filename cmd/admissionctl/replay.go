package main

import (
	"fmt"
	"io"

	"latent.dev/admission/internal/printable"
	"latent.dev/admission/internal/scenario"
	"latent.dev/admission/internal/strictjson"
)

func init() {
	commands["replay"] = runReplay
}

const replayUsage = "usage: admissionctl replay [--check] [-q] FILE..."

// runReplay runs scenario files ("-" is standard input) and prints one
// JSON line per step. With --check it compares every step with its expect
// and exits 1 on any mismatch; -q leaves out the JSON lines. An input that
// cannot be read exits 3, whatever happened to the others. Flags may
// follow the files.
func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay")
	var check, quiet bool
	fs.BoolVar(&check, "check", false, "compare every step with its expect and exit 1 on a mismatch")
	fs.BoolVar(&quiet, "q", false, "leave out the JSON lines")
	fs.BoolVar(&quiet, "quiet", false, "the same as -q")
	files, err := parseArgs(fs, args)
	if err != nil {
		return flagMisuse(stderr, fs, err, replayUsage)
	}
	if len(files) == 0 {
		fmt.Fprintln(stderr, replayUsage)
		return exitMisuse
	}
	status := exitOK
	for _, file := range files {
		if code := replayFile(file, check, quiet, stdout, stderr); code > status {
			status = code
		}
	}
	return status
}

// replayFile replays one file and returns its exit status.
func replayFile(file string, check, quiet bool, stdout, stderr io.Writer) int {
	data, err := readInput(file)
	if err != nil {
		printUnreadable(stderr, file, err)
		return exitUnreadable
	}
	name := printable.String(file)
	s, err := scenario.Decode(data)
	if err != nil {
		for _, p := range strictjson.AsProblems(err) {
			fmt.Fprintf(stderr, "%s: %s\n", name, p)
		}
		return exitProblems
	}
	results, err := s.Run()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", name, printable.String(err.Error()))
		return exitProblems
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
			fmt.Fprintf(stderr, "%s: step %d (%s): %s\n", name, res.Index, printable.String(res.Op), printable.String(m.String()))
		}
	}
	if check {
		if mismatches > 0 {
			fmt.Fprintf(stderr, "FAIL %s: %d mismatches in %d steps\n", name, mismatches, len(results))
			return exitProblems
		}
		fmt.Fprintf(stderr, "ok   %s (%d steps)\n", name, len(results))
	}
	return exitOK
}
