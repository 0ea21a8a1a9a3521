// Package latentd is the standalone node: an authenticated HTTP edge in
// front of admission (core), the catalog, and the pipeline that runs
// admitted guests (node/scheduler, node/cellpool, node/runner), with the
// load sampler (node/loadsampler) publishing this machine's pressure and
// the edge/metrics collector on a registry of its own. cmd/latentd is its
// command; docs/latentd.md is the operator's page.
//
// # Invocation
//
// POST /v1/invoke/{tenant}/{service}/{route} runs in a fixed order:
//
//  1. the bearer token is hashed and compared, in constant time, with the
//     SHA-256 digests of the token file (no token or an unknown one: 401);
//  2. a principal of another tenant, an administrator, or one admission's
//     step 3 would refuse gets admission's principal-not-authorized 403,
//     decided before the catalog is consulted, so another tenant's paths
//     answer the same whether or not they exist;
//  3. the Latent-* headers are parsed (a malformed one: 400 naming it);
//  4. the body is read through a limit of the node's payload maximum plus
//     one byte: the payload is what was read, never Content-Length, and a
//     larger body is never read further (admission then answers 413);
//  5. the route resolves on the current pin (nothing: 404,
//     revision-not-available, like a forged revision);
//  6. Admit on the controller of that same pin;
//  7. the permit goes to the pipeline, which owns it from then on; the
//     handler waits for the outcome under the request's context.
//
// Rejections map to statuses by StatusFor and carry a body of exactly the
// five vocabulary fields, and Retry-After (from Config.RetryAfter, never
// from load) exactly when they are retryable. Outcomes after admission
// carry Latent-Outcome.
//
// # Who reaches what
//
// Administrator endpoints (the status API among them) and /debug/ obey
// the Host rule (host.go): a Host that is not loopback, localhost or one
// of Config.AllowedHosts is 403 before the token is looked at, so a page
// that rebinds its name to a loopback node cannot reach them. The rule
// lives in the handler, so it holds under any server. GET /metrics gives
// an anonymous scraper (or a tenant's token) the node-level series only,
// and every series to an administrator's or a metrics token (metrics.go).
// Usage asks the policy's principal check that invocation asks.
//
// Every answer to a request that carries a token is Cache-Control:
// no-store (answer.go, observe), whichever handler gives it.
//
// # What a client can cost
//
// Serve holds at most Config.MaxConnections connections, and
// Config.MaxConnectionsPerClient from one client (an IP address, or an
// IPv6 /64); the listener closes the excess as soon as it is accepted
// (connlimit.go), so idle connections, HTTP/2 ones among them, cannot
// exhaust descriptors or memory. The HTTP server's own log goes through
// Config.Logger, rate-limited (serverlog.go), so failed handshakes cannot
// flood it; the access log names the activation ID only once it passes
// admission's identifier rule.
//
// # Views
//
// Deploys and deletes go through the catalog (and so its store) under
// adminMu, and then publish a new view: the pin and a controller over it.
// An invocation loads the view once, so it resolves and is admitted
// against one generation.
//
// # Lifecycle
//
// New opens or creates the store (a second node on the same store fails
// with catalog.ErrStoreInUse), prepares every deployed artifact (compiled
// once, never at admission), starts the pipeline and the sampler.
// Shutdown stops accepting, gives running activations the grace period,
// then interrupts them, waits for every handler, closes the pipeline
// (which releases every permit), stops the sampler, closes the guest
// runtime and the catalog, and reports any reservation still live.
//
// # Caveats
//
// Admission's rejection counters do not count what the edge refuses
// before admission (401, a cross-tenant 403, a malformed header, an
// unresolved route). Guests are whatever Config.Guests runs: edge/guest
// for WebAssembly, a synthetic backend in tests.
package latentd
