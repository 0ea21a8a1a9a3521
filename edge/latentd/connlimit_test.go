package latentd

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metricValue is a counter's or a gauge's value.
func metricValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// probe is one raw connection from a chosen loopback address, on which
// the test sends requests itself.
type probe struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialFrom(t *testing.T, from, addr string) *probe {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &probe{conn: conn, r: bufio.NewReader(conn)}
}

// healthy sends GET /healthz and reports whether it was answered 200; a
// connection the node closed is not.
func (p *probe) healthy(t *testing.T) bool {
	t.Helper()
	if err := p.conn.SetDeadline(time.Now().Add(patience)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(p.conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(p.r, nil)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// One client cannot hold more connections than its cap, nor all clients
// together more than the node's; the excess is closed at once and
// counted, and the node still serves everyone else.
func TestConnectionsAreCappedInTotalAndPerClient(t *testing.T) {
	tn := startNode(t, nodeOptions{mutate: func(c *Config) { c.MaxConnections, c.MaxConnectionsPerClient = 5, 3 }})
	addr := strings.TrimPrefix(tn.url, "http://")
	refused := func(reason string) float64 {
		return metricValue(t, tn.node.conns.refused.WithLabelValues(reason))
	}

	// 127.0.0.1 holds three connections; its fourth and fifth are closed.
	var kept []*probe
	for i := range 3 {
		p := dialFrom(t, "127.0.0.1", addr)
		if !p.healthy(t) {
			t.Fatalf("connection %d of 127.0.0.1, within its cap, was not served", i+1)
		}
		kept = append(kept, p)
	}
	for i := 3; i < 5; i++ {
		if dialFrom(t, "127.0.0.1", addr).healthy(t) {
			t.Errorf("connection %d of 127.0.0.1, past its cap of 3, was served", i+1)
		}
	}
	if got := refused(refusedPerClient); got != 2 {
		t.Errorf("refused per client: %v, want 2", got)
	}
	// Another client is still served, up to the node's cap of 5.
	for i := range 2 {
		if !dialFrom(t, "127.0.0.2", addr).healthy(t) {
			t.Fatalf("connection %d of 127.0.0.2 was not served beside 127.0.0.1's", i+1)
		}
	}
	if dialFrom(t, "127.0.0.3", addr).healthy(t) {
		t.Error("a sixth connection, past the node's cap of 5, was served")
	}
	if got := refused(refusedTotal); got != 1 {
		t.Errorf("refused in total: %v, want 1", got)
	}
	if got := metricValue(t, tn.node.conns.open); got != 5 {
		t.Errorf("open connections: %v, want 5", got)
	}

	// A connection that closes gives its place back.
	kept[0].conn.Close()
	deadline := time.Now().Add(patience)
	for !dialFrom(t, "127.0.0.3", addr).healthy(t) {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's place was never given back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, p := range kept[1:] {
		if !p.healthy(t) {
			t.Error("a connection within the caps was closed")
		}
	}
}

func TestClientKeyGroupsAnIPv6Slash64(t *testing.T) {
	a := clientKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1")})
	b := clientKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9")})
	c := clientKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1")})
	if a != b || a == c {
		t.Errorf("keys %q %q %q: one /64 is one client", a, b, c)
	}
	if k := clientKey(&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.1")}); k != "192.0.2.1" {
		t.Errorf("an IPv4-mapped address: %q", k)
	}
}

// Over TLS, HTTP/2 connections that sit idle count against the caps as
// any other: past a client's cap the handshake itself fails.
func TestIdleHTTP2ConnectionsAreCapped(t *testing.T) {
	cert := selfSigned(t)
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.MaxConnectionsPerClient = 2
		c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}})
	addr := strings.TrimPrefix(tn.url, "http://")
	pool := x509.NewCertPool()
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(leaf)
	dial := func() (*tls.Conn, error) {
		d := &net.Dialer{Timeout: patience}
		conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12})
		if err == nil {
			t.Cleanup(func() { conn.Close() })
		}
		return conn, err
	}
	for i := range 2 {
		conn, err := dial()
		if err != nil {
			t.Fatalf("idle connection %d within the cap: %v", i+1, err)
		}
		if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("negotiated %q, want h2", p)
		}
	}
	for i := 2; i < 6; i++ {
		if _, err := dial(); err == nil {
			t.Errorf("idle HTTP/2 connection %d, past the cap of 2, was accepted", i+1)
		}
	}
	if got := metricValue(t, tn.node.conns.refused.WithLabelValues(refusedPerClient)); got != 4 {
		t.Errorf("refused per client: %v, want 4", got)
	}
	if got := metricValue(t, tn.node.conns.open); got != 2 {
		t.Errorf("open: %v, want 2", got)
	}
}
