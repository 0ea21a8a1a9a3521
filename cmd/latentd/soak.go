package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"latent.dev/admission/edge/soak"
)

// soakMain runs `latentd soak`: soak.Run (edge/soak), an in-process
// demonstration node on a loopback port and a bounded request loop
// against it (valid invocations, distinct rejected targets, oversized
// payloads), then the node's invariants: every reservation back, nothing
// queued or running. `cmd/stress -http` runs the same soak.
func soakMain(args []string, stdout, stderr io.Writer) int {
	var so soak.Options
	fs := flag.NewFlagSet("latentd soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&so.Requests, "requests", 2000, "stop after this many requests")
	fs.DurationVar(&so.Duration, "duration", 30*time.Second, "stop after this long")
	fs.IntVar(&so.Concurrency, "concurrency", 8, "concurrent clients")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if so.Requests <= 0 || so.Duration <= 0 || so.Concurrency <= 0 {
		fmt.Fprintln(stderr, "latentd soak: -requests, -duration and -concurrency must be positive")
		return 2
	}
	report, err := soak.Run(context.Background(), so)
	if err != nil {
		fmt.Fprintln(stderr, "latentd soak:", err)
		return 1
	}
	fmt.Fprint(stdout, report.String())
	if len(report.Violations) > 0 {
		return 1
	}
	return 0
}
