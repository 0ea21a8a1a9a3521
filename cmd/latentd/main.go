// Command latentd is the standalone node: it serves the authenticated
// invocation API in front of admission and runs WebAssembly guests under
// its permits (docs/latentd.md).
//
//	latentd [-policy FILE] [-store DIR -artifacts DIR] [-tokens FILE] [-listen ADDR] [-allowed-host NAME]...
//
// Without flags it serves an embedded demonstration policy, catalog,
// token file and guest on 127.0.0.1:8080 and prints a curl line that
// calls it; any other start needs -tokens. `latentd soak` runs an
// in-process node and a bounded HTTP request loop against it over
// loopback. `latentd fleet-demo` (make fleet) starts one etcd and three
// nodes on loopback with acme fleet-limited, drives load at all three and
// prints each node's slice and live count each second (docs/fleet.md).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// First: SIGHUP's default action ends the process, and a reload
	// may be asked for as soon as the process exists (systemctl reload,
	// a certificate renewal hook), long before the node serves. One
	// that comes during start waits in the channel, and is done once
	// the node serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		signal.Stop(hup)
		os.Exit(soakMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "fleet-demo" {
		signal.Stop(hup)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := fleetDemoMain(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go onSignals(signals, cancel, os.Stderr, os.Exit)
	os.Exit(serveWithReloads(ctx, os.Args[1:], hup, os.Stdout, os.Stderr))
}

// onSignals turns the first SIGTERM or SIGINT into a graceful shutdown
// (cancel) and a second one, during the grace period, into an exit with
// status 1 at once, as operators expect of a second interrupt.
func onSignals(signals <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
	<-signals
	cancel()
	sig := <-signals
	fmt.Fprintf(stderr, "latentd: second signal (%v) during the grace period: exiting at once\n", sig)
	exit(1)
}
