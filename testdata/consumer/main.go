// Command consumer is an embedder that imports only core, policy and
// catalog. The edge module's hygiene test lists its module graph to prove
// that the edge's dependencies (the Prometheus client, the Wasm runtime)
// never reach such an embedder.
package main

import (
	"fmt"
	"os"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: consumer POLICY")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	provider, err := core.NewLocalQuotaProvider(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cat := catalog.New(catalog.GenerousCapacity)
	load := core.NewNodeLoadState(time.Second, nil)
	_ = provider.Controller(core.ControllerConfig{Source: cat.Pin(), Load: load})
	fmt.Println("catalog generation", cat.Generation())
}
