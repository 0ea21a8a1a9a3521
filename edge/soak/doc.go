// Package soak soaks a node over HTTP: [Run] serves the embedded
// demonstration (edge/latentd/demo) with edge/latentd on a loopback port
// and runs a request loop bounded by count and by time against it, then
// reports the status counts, latency percentiles and the node's
// invariants after shutdown. `latentd soak` (`make soak-http`) and
// `cmd/stress -http` both run it.
//
// # The mix
//
// Of every ten requests: five valid invocations of acme/hello/greet,
// two other tenants' paths, each distinct (403), one unknown route, each
// distinct (404), one without a token (401) and one payload of 64 KiB
// and a byte, over the demonstration's maximum (413).
//
// # Invariants
//
// After the loop the node shuts down and Run checks that every
// reservation came back, nothing is queued or running, no permit leaked,
// shutdown and serve ended cleanly, and the process's goroutines are back
// at their count before the node started. It waits for the counters and
// goroutines to settle (at most a minute, no longer than they take): a
// loaded machine stretches the moment between a client's last answer and
// the scheduler counting its activation finished.
//
// # Caveats
//
// The goroutine count is the whole process's: a caller that starts
// goroutines of its own during a soak makes it report a violation.
package soak
