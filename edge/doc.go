// Package edge is the root of the node edge module: what surrounds the
// admission library on a real node and brings dependencies an embedder
// of the library must not get.
//
// # Layout
//
//	edge/metrics      the Prometheus collector over a node's admission state
//	edge/guest        the WebAssembly backend: WASI command modules on wazero
//	edge/latentd      the node's HTTP API, admin endpoints and status page
//	edge/soak         an in-process latentd soaked over loopback HTTP
//	edge/browsertest  headless-browser checks of the HTML pages
//	edge/fleet        the fleet broker: each node's slice of a tenant's fleet limit, on etcd
//
// The load sampler needs only the standard library and lives in the main
// module (node/loadsampler); the node's command is cmd/latentd, a module
// of its own.
//
// # Dependency hygiene
//
// This is a module of its own (latent.dev/admission/edge, with a replace
// of latent.dev/admission to the parent directory, and a go.work at the
// repository root for development), so that github.com/prometheus/...,
// github.com/tetratelabs/wazero and go.etcd.io/etcd/client/v3 (with
// gRPC) appear in its module graph and never in the main module's. The
// test in this package proves it from testdata/consumer, a module that
// imports only core, policy and catalog: its `go list -m all` names none
// of them.
//
// # Caveats
//
// Workspace mode builds edge against the working tree of the main module;
// outside it (GOWORK=off) the replace directive does the same. A release
// of the edge module would replace the directive with a required version.
package edge
