package latentd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"testing"

	"latent.dev/admission/edge/internal/loopbench"
	"latent.dev/admission/edge/latentd/demo"
	"latent.dev/admission/policy"
)

// The loopback invocation benchmark (docs/latentd.md, "Cost of an
// invocation"; make bench-invoke): a real latentd on 127.0.0.1 with the
// real guest runtime and the demonstration guest (edge/latentd/demo), the
// policy testdata/bench-policy.json (the demonstration's with CPU
// threshold 1.0 and acme's live and queued limits at 64, so that nothing
// is shed; the same file make compare-edge gives latentd), no access log,
// and POST world to /v1/invoke/acme/hello/greet. The load sampler reads
// the calm fixture (testdata/load/calm), not this machine: a machine the
// benchmark itself keeps 100% busy reads CPU pressure 1.0, which even the
// threshold 1.0 refuses (admission sheds at pressure ≥ threshold).
// The client (edge/internal/loopbench) allocates nothing once warm, so
// allocs/op and B/op are the node's; make bench-invoke runs the bare
// handler's (edge/bench/barewasm) beside it.

// benchPolicy is testdata/bench-policy.json.
func benchPolicy(tb testing.TB) *policy.NodeAdmissionPolicy {
	tb.Helper()
	data, err := os.ReadFile("testdata/bench-policy.json")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// startBenchNode serves the demonstration on WasmGuests with benchPolicy
// on 127.0.0.1:0 and returns its address; cleanup shuts it down.
func startBenchNode(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	pol := benchPolicy(tb)
	tokens, err := DecodeTokens(demo.TokensJSON())
	if err != nil {
		tb.Fatal(err)
	}
	deployments, err := demo.Deployments()
	if err != nil {
		tb.Fatal(err)
	}
	guests, err := NewWasmGuests(ctx, WasmConfig{ArtifactsDir: tb.TempDir(), MaxResponseBytes: 1 << 20,
		MaxMemoryBytes: pol.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		tb.Fatal(err)
	}
	if err := guests.PutArtifact(demo.GuestDigest(), bytes.NewReader(demo.Guest())); err != nil {
		_ = guests.Close(ctx)
		tb.Fatal(err)
	}
	n, err := New(Config{Policy: pol, Tokens: tokens, Guests: guests, Deployments: deployments, Logger: quietLogger(),
		Load: loadFiles("calm")})
	if err != nil {
		_ = guests.Close(ctx)
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = n.Shutdown(ctx)
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- n.Serve(l) }()
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, patience)
		defer cancel()
		if err := n.Shutdown(sctx); err != nil {
			tb.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("serve: %v", err)
		}
	})
	return l.Addr().String()
}

// BenchmarkInvokeLoopback is one invocation of the demonstration guest
// over loopback (loopbench.Run: one connection, and 32); every answer
// must be 200 "hello, world".
func BenchmarkInvokeLoopback(b *testing.B) {
	addr := startBenchNode(b)
	loopbench.Run(b, addr, "/v1/invoke/acme/hello/greet", demo.UserToken, []byte("world"), []byte("hello, world"))
}
