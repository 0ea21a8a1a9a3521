package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"latent.dev/admission/edge/internal/loopbench"
	"latent.dev/admission/edge/latentd/demo"
)

// serve runs the bare handler on 127.0.0.1:0 until the test ends.
func serve(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	h, err := newHandler(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	tb.Cleanup(func() {
		_ = srv.Shutdown(ctx)
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("serve: %v", err)
		}
		_ = h.runtime.Close(ctx)
	})
	return l.Addr().String()
}

// TestHello checks that the bare handler answers what latentd's
// demonstration answers.
func TestHello(t *testing.T) {
	addr := serve(t)
	c, err := loopbench.Dial(addr, "/v1/invoke/acme/hello/greet", "", []byte("world"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status, body, err := c.Do()
	if err != nil || status != http.StatusOK || string(body) != "hello, world" {
		t.Fatalf("answer %d %q %v, want 200 \"hello, world\"", status, body, err)
	}
}

// BenchmarkBareLoopback is the bare handler under the loopback benchmark
// of latentd's BenchmarkInvokeLoopback (the same client, request and
// token), for make bench-invoke.
func BenchmarkBareLoopback(b *testing.B) {
	addr := serve(b)
	loopbench.Run(b, addr, "/v1/invoke/acme/hello/greet", demo.UserToken, []byte("world"), []byte("hello, world"))
}
