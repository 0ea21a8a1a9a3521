package main

import (
	"fmt"
	"io"
	"math"
	"strconv"

	"latent.dev/admission/node/loadsampler"
)

func init() {
	commands["load"] = runLoad
}

const loadUsage = "usage: admissionctl load [-proc DIR] [-cgroup DIR]"

// runLoad prints one one-shot load sample as JSON, with the source of
// each resource, so that an operator sees what the node would publish:
//
//	{"cpu": 0.42, "memory": 0.9, "sources": {"cpu": "psi", "memory": "cgroup2"}}
//
// -proc replaces /proc; -cgroup names the cgroup's own directory, found
// through PROC/self/cgroup when omitted. A source that is present but
// unreadable or malformed is an error naming the file (exit 1).
func runLoad(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("load")
	var files loadsampler.Files
	fs.StringVar(&files.Proc, "proc", "", "directory that replaces /proc (holding pressure/, loadavg, meminfo, self/cgroup)")
	fs.StringVar(&files.Cgroup, "cgroup", "", "the cgroup's own directory (default: found through PROC/self/cgroup)")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return flagMisuse(stderr, fs, err, loadUsage)
	}
	if len(rest) != 0 {
		fmt.Fprintln(stderr, loadUsage)
		return exitMisuse
	}
	r, err := loadsampler.ReadOnce(files)
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl load: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "{\"cpu\": %s, \"memory\": %s, \"sources\": {\"cpu\": %q, \"memory\": %q}}\n",
		fraction(r.CPU), fraction(r.Memory), r.Sources.CPU, r.Sources.Memory)
	return 0
}

// fraction prints a pressure to six decimals without trailing zeros, so
// that avg10's two decimals of a percent print as they read (0.7843, not
// 0.7843000000000001).
func fraction(f float64) string {
	return strconv.FormatFloat(math.Round(f*1e6)/1e6, 'f', -1, 64)
}
