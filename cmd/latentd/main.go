// Command latentd is the standalone node: it serves the authenticated
// invocation API in front of admission and runs WebAssembly guests under
// its permits (docs/latentd.md).
//
//	latentd [-policy FILE] [-store DIR] [-artifacts DIR] [-tokens FILE] [-listen ADDR]
//
// Without flags it serves an embedded demonstration policy, catalog,
// token file and guest on 127.0.0.1:8080 and prints a curl line that
// calls it. `latentd soak` runs an in-process node and a bounded HTTP
// request loop against it over loopback.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		os.Exit(soakMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(serveMain(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
