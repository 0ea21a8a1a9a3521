package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"latent.dev/admission/internal/printable"
)

// newFlagSet is a subcommand's flag set. It prints nothing itself:
// parseArgs's caller prints the problem, one line naming the command,
// then the subcommand's usage.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseArgs parses args with fs and returns the positional arguments.
// Flags may come before, between and after them (`replay FILE --check`,
// `shadow TRACE -policy P`): flag.Parse stops at the first positional
// argument, so parseArgs takes it and parses the rest again. "-" is
// positional (standard input), and every argument after a "--" is.
// -flag and --flag are the same flag.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagProblem(err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// flagProblem words the flag package's errors as admissionctl always
// has: "unknown flag -x", "-x needs a value".
func flagProblem(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return errors.New("unknown flag " + name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return errors.New(name + " needs a value")
	}
	return err
}

// onceString is a string flag given at most once, and with a value;
// check says what is wrong after parsing.
type onceString struct {
	value      string
	times      int
	emptyValue bool
}

func (s *onceString) String() string { return s.value }

func (s *onceString) Set(v string) error {
	s.times++
	s.value = v
	s.emptyValue = s.emptyValue || v == ""
	return nil
}

// check reports a flag given twice or without a value.
func (s *onceString) check(name string) error {
	switch {
	case s.times > 1:
		return errors.New("-" + name + " given twice")
	case s.emptyValue:
		return errors.New("-" + name + " needs a value")
	}
	return nil
}

// flagMisuse prints a flag problem of subcommand fs (none for -h), then
// usage and the flags' defaults, and returns exitMisuse.
func flagMisuse(stderr io.Writer, fs *flag.FlagSet, err error, usage string) int {
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "admissionctl %s: %s\n", fs.Name(), printable.String(err.Error()))
	}
	fmt.Fprintln(stderr, usage)
	fs.SetOutput(stderr)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	return exitMisuse
}
