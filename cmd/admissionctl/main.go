// Command admissionctl is the operator's tool for admission: it validates
// policy and catalog files before they are rolled out, and replays
// scenario files to explain a decision offline; load prints the load
// sample the node's sampler would publish.
//
//	admissionctl validate policy FILE
//	admissionctl validate catalog FILE [--policy FILE]
//	admissionctl replay [--check] FILE...
//	admissionctl shadow -policy FILE [-catalog FILE] [-report FILE.html] TRACE...
//	admissionctl load [-proc DIR] [-cgroup DIR]
//	admissionctl node push|deploy|undeploy|usage|snapshot [flags] ARGS (a running latentd)
//	admissionctl fleet set TENANT LIMIT | get TENANT | list [flags] (the fleet limits in etcd)
//
// admissionctl is a module of its own (it needs the edge module's etcd
// client for `fleet`), so that the library's embedders never see etcd;
// go.work makes `go run ./cmd/admissionctl` work from the root.
//
// Flags may come before, between or after the files (`replay FILE
// --check`); -flag and --flag are the same flag, and "--" ends the flags.
// A FILE of "-" is standard input. An input longer than 8 MiB
// (strictjson.MaxDocumentBytes) is refused without being read further;
// docs/input-limits.md lists every limit.
//
// Every problem is one line, `path: message`, and every key, value and file
// name in it is printed with unprintable characters escaped.
//
// Exit status:
//
//	0  everything is valid, or every check passed
//	1  a file has problems, a replay check failed, or the node refused
//	2  misuse: unknown command, kind or flag, wrong arguments
//	3  an input could not be read or exceeds the size limit, or the node
//	   could not be reached
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command runs one subcommand with its arguments and returns the exit code.
type command func(args []string, stdout, stderr io.Writer) int

// commands holds the top-level subcommands; each file registers its own.
var commands = map[string]command{}

// validators holds the `validate KIND` kinds; each file registers its own.
var validators = map[string]command{}

func init() {
	commands["validate"] = runValidate
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "admissionctl: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: admissionctl COMMAND ...\ncommands: %s\nvalidate kinds: %s\n%s\n",
		strings.Join(sortedKeys(commands), ", "), strings.Join(sortedKeys(validators), ", "), exitStatusUsage)
}

func sortedKeys(m map[string]command) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func runValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: admissionctl validate KIND FILE (kinds: %s)\n", strings.Join(sortedKeys(validators), ", "))
		return 2
	}
	v, ok := validators[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "admissionctl validate: unknown kind %q (kinds: %s)\n", args[0], strings.Join(sortedKeys(validators), ", "))
		return 2
	}
	return v(args[1:], stdout, stderr)
}
