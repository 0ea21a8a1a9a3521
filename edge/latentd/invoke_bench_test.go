package latentd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"testing"

	"latent.dev/admission/edge/latentd/demo"
	"latent.dev/admission/policy"
)

// The loopback invocation benchmark (docs/latentd.md, "Cost of an
// invocation"; make bench-invoke): a real latentd on 127.0.0.1 with the
// real guest runtime and the demonstration guest (edge/latentd/demo), the
// policy testdata/bench-policy.json (the demonstration's with CPU
// threshold 1.0 and acme's live and queued limits at 64, so that nothing
// is shed; the same file make compare-edge gives latentd), the machine's
// own load, no access log, and POST world to /v1/invoke/acme/hello/greet.
//
// The client is a minimal HTTP/1.1 client on kept-alive connections that
// writes one prepared request and reads the answer into reused buffers,
// allocating nothing once warm, so allocs/op and B/op are the node's.

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
	n, err := New(Config{Policy: pol, Tokens: tokens, Guests: guests, Deployments: deployments, Logger: quietLogger()})
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

// rawClient is one kept-alive HTTP/1.1 connection that sends one
// prepared request again and again.
type rawClient struct {
	conn    net.Conn
	r       *bufio.Reader
	request []byte
	body    []byte
}

func dialRaw(addr, path, token string, body []byte) (*rawClient, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	req := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s",
		path, addr, token, len(body), body)
	return &rawClient{conn: conn, r: bufio.NewReaderSize(conn, 4096), request: req, body: make([]byte, 0, 4096)}, nil
}

// do sends the request and reads the answer; it returns the status and
// the body, which the next call reuses.
func (c *rawClient) do() (int, []byte, error) {
	if _, err := c.conn.Write(c.request); err != nil {
		return 0, nil, err
	}
	status, length := 0, -1
	for first := true; ; first = false {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if first {
			// HTTP/1.1 200 OK
			if len(line) < 12 {
				return 0, nil, fmt.Errorf("status line %q", line)
			}
			status, err = strconv.Atoi(string(line[9:12]))
			if err != nil {
				return 0, nil, fmt.Errorf("status line %q", line)
			}
			continue
		}
		if name, value, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(name, []byte("Content-Length")) {
			length, err = strconv.Atoi(string(bytes.TrimSpace(value)))
			if err != nil {
				return 0, nil, fmt.Errorf("Content-Length %q", value)
			}
		}
	}
	if length < 0 || length > 1<<20 {
		return 0, nil, fmt.Errorf("answer without a usable Content-Length (%d)", length)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return 0, nil, err
	}
	return status, c.body, nil
}

// BenchmarkInvokeLoopback is one invocation of the demonstration guest
// over loopback, from a client on one connection (conns=1) and from 32
// clients on a connection each (conns=32, as make compare-edge's wrk
// -c32), with allocs/op; every answer must be 200 "hello, world".
func BenchmarkInvokeLoopback(b *testing.B) {
	addr := startBenchNode(b)
	const path = "/v1/invoke/acme/hello/greet"
	want := []byte("hello, world")
	check := func(c *rawClient) error {
		status, body, err := c.do()
		if err != nil {
			return err
		}
		if status != http.StatusOK || !bytes.Equal(body, want) {
			return fmt.Errorf("answer %d %q, want 200 %q", status, body, want)
		}
		return nil
	}
	for _, conns := range []int{1, 32} {
		b.Run("conns="+strconv.Itoa(conns), func(b *testing.B) {
			// RunParallel runs GOMAXPROCS × parallelism goroutines, one
			// connection each: at least conns of them.
			procs := runtime.GOMAXPROCS(0)
			parallelism := (conns + procs - 1) / procs
			dials := conns
			if conns > 1 {
				dials = parallelism * procs
			}
			clients := make(chan *rawClient, dials)
			for range dials {
				c, err := dialRaw(addr, path, demo.UserToken, []byte("world"))
				if err != nil {
					b.Fatal(err)
				}
				defer c.conn.Close()
				// Warm the connection (the server's buffers, the guest's
				// first instance).
				if err := check(c); err != nil {
					b.Fatal(err)
				}
				clients <- c
			}
			b.ReportAllocs()
			b.ResetTimer()
			if conns == 1 {
				c := <-clients
				for b.Loop() {
					if err := check(c); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(parallelism)
			b.RunParallel(func(pb *testing.PB) {
				var c *rawClient
				select {
				case c = <-clients:
				default:
					b.Error("more goroutines than connections")
					return
				}
				for pb.Next() {
					if err := check(c); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
