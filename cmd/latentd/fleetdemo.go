package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// fleetDemoMain runs `latentd fleet-demo` (make fleet): one etcd and
// -nodes latentd nodes on loopback, acme fleet-limited to -limit, clients
// holding acme's guest on every node, and each second a line per node
// (its slice and live count) and the fleet's total against the limit.
// It ends after -duration or -requests invocations, or at ctx's end
// (Ctrl-C), and stops everything it started.
func fleetDemoMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("latentd fleet-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "latentd nodes")
	limit := fs.Int64("limit", 12, "acme's fleet limit on live activations")
	clients := fs.Int("clients", 6, "clients per node, each holding acme's guest ("+fleetHold.String()+") again as soon as it ends")
	duration := fs.Duration("duration", 20*time.Second, "how long the load runs")
	requests := fs.Int64("requests", 20000, "the most invocations in all")
	verbose := fs.Bool("v", false, "pass the nodes' and etcd's logs through to standard error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *nodes < 1 || *nodes > 16 || *limit < 0 || *clients < 1 || *clients > 256 || *duration <= 0 || *requests < 1 {
		fmt.Fprintln(stderr, "latentd fleet-demo: -nodes in [1, 16], -limit not negative, -clients in [1, 256], -duration and -requests positive")
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "latentd fleet-demo:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "latentd-fleet-")
	if err != nil {
		fmt.Fprintln(stderr, "latentd fleet-demo:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var logs io.Writer
	if *verbose {
		logs = stderr
	}
	fmt.Fprintf(stdout, "fleet-demo: starting etcd and %d nodes in %s\n", *nodes, dir)
	c, err := startFleetCluster(dir, exe, nil, logs)
	if err != nil {
		fmt.Fprintln(stderr, "latentd fleet-demo:", err)
		return 1
	}
	defer func() {
		fmt.Fprintln(stdout, "fleet-demo: stopping the nodes and etcd")
		c.stop()
	}()
	if err := c.setLimit(*limit); err != nil {
		fmt.Fprintln(stderr, "latentd fleet-demo:", err)
		return 1
	}
	fmt.Fprintf(stdout, "fleet-demo: etcd on %s; acme's fleet limit is %d (admissionctl fleet set acme %d -etcd %s)\n",
		c.etcd.Endpoint, *limit, *limit, c.etcd.Endpoint)
	for i := range *nodes {
		n, err := c.addNode(fmt.Sprintf("node%d", i+1))
		if err != nil {
			fmt.Fprintln(stderr, "latentd fleet-demo:", err)
			return 1
		}
		fmt.Fprintf(stdout, "fleet-demo: %s serves on %s (status: %s/status#token=%s)\n", n.id, n.url, n.url, DemoAdminToken)
	}

	loadCtx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	var sent, admitted, full, unavailable atomic.Int64
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		for range *clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for loadCtx.Err() == nil && sent.Add(1) <= *requests {
					a := n.invoke("acme")
					switch {
					case a.status == 200:
						admitted.Add(1)
					case a.reason == "capacity-exhausted":
						full.Add(1)
						time.Sleep(20 * time.Millisecond)
					default:
						unavailable.Add(1)
						time.Sleep(100 * time.Millisecond)
					}
				}
				if sent.Load() > *requests {
					cancel()
				}
			}()
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	var peak, sum, samples int64
	for done := false; !done; {
		select {
		case <-loadCtx.Done():
			done = true
		case <-tick.C:
		}
		line := fmt.Sprintf("%5.1fs", time.Since(start).Seconds())
		var total int64
		for _, n := range c.nodes {
			f, err := n.fleetStatus()
			if err != nil {
				line += fmt.Sprintf("  %s: %v", n.id, err)
				continue
			}
			slice := "none"
			if f.Published && f.ValidForMS > 0 {
				slice = fmt.Sprint(f.Slice)
			}
			line += fmt.Sprintf("  %s slice %3s live %3d", n.id, slice, f.Live)
			total += int64(f.Live)
		}
		peak, sum, samples = max(peak, total), sum+total, samples+1
		fmt.Fprintf(stdout, "%s  | fleet live %3d of limit %d\n", line, total, *limit)
	}
	wg.Wait()
	mean := 0.0
	if samples > 0 && *limit > 0 {
		mean = float64(sum) / float64(samples) / float64(*limit) * 100
	}
	fmt.Fprintf(stdout, "fleet-demo: %d admitted, %d refused for a full slice, %d refused as unavailable; fleet live peak %d of %d, mean %.0f%% of the limit\n",
		admitted.Load(), full.Load(), unavailable.Load(), peak, *limit, mean)
	return 0
}
