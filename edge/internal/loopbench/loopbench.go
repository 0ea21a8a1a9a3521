// Package loopbench is the client side of the edge's loopback
// benchmarks (docs/latentd.md, "Cost of an invocation"): a minimal
// HTTP/1.1 client on kept-alive connections that writes one prepared
// request and reads the answer into reused buffers, allocating nothing
// once warm, so that a benchmark's allocs/op and B/op are the server's;
// and Run, which drives a server with it from one connection and from
// 32.
package loopbench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"testing"
)

// Client is one kept-alive HTTP/1.1 connection that sends one
// prepared request again and again.
type Client struct {
	conn    net.Conn
	r       *bufio.Reader
	request []byte
	body    []byte
}

// Dial connects to addr and prepares a POST of body to path, with the
// bearer token when it is not empty.
func Dial(addr, path, token string, body []byte) (*Client, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	req := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n%s",
		path, addr, auth, len(body), body)
	return &Client{conn: conn, r: bufio.NewReaderSize(conn, 4096), request: req, body: make([]byte, 0, 4096)}, nil
}

// Do sends the request and reads the answer; it returns the status and
// the body, which the next call reuses.
func (c *Client) Do() (int, []byte, error) {
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

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Run benchmarks POST body to path on addr, answered 200 want, from a
// client on one connection (conns=1) and from 32 clients on a connection
// each (conns=32, as make compare-edge's wrk -c32; GOMAXPROCS ×
// ⌈32/GOMAXPROCS⌉ of them), with allocs/op. token, when not empty, is
// sent as a bearer token. Any other answer fails the benchmark.
func Run(b *testing.B, addr, path, token string, body, want []byte) {
	check := func(c *Client) error {
		status, got, err := c.Do()
		if err != nil {
			return err
		}
		if status != http.StatusOK || !bytes.Equal(got, want) {
			return fmt.Errorf("answer %d %q, want 200 %q", status, got, want)
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
			clients := make(chan *Client, dials)
			for range dials {
				c, err := Dial(addr, path, token, body)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
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
				var c *Client
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
