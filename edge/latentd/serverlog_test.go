package latentd

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// selfSigned is a certificate for 127.0.0.1, valid for an hour either way.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The HTTP server's own errors (here: failed TLS handshakes, which any
// client causes) are JSON lines of the node's log, at most a burst of
// them while the clock stands still; the rest are counted, and the next
// line written says how many were left out.
func TestTheServerLogIsSlogAndRateLimited(t *testing.T) {
	var logBuf syncBuffer
	guests := newFakeGuests()
	cert := selfSigned(t)
	cfg := testConfig(t, guests, nodeOptions{mutate: func(c *Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logBuf, nil))
		c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}})
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	n.serverLog.now = func() time.Time { return time.Unix(0, clock.Load()) }
	tn := serveNode(t, n, guests)
	addr := strings.TrimPrefix(tn.url, "http://")

	// A client that speaks neither TLS nor HTTP: the server logs the
	// failed handshake, then closes the connection.
	failHandshake := func() {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(patience)); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte("\x00\x01\x02\x03\x04\x05 not a handshake")); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, conn)
	}
	const attempts = 3 * serverLogBurst
	for range attempts {
		failHandshake()
	}
	serverLines := func() []map[string]any {
		var out []map[string]any
		sc := bufio.NewScanner(strings.NewReader(logBuf.String()))
		for sc.Scan() {
			var entry map[string]any
			if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
				t.Fatalf("a log line that is not JSON: %q", sc.Text())
			}
			if entry["msg"] == "latentd: http server" {
				out = append(out, entry)
			}
		}
		return out
	}
	lines := serverLines()
	if len(lines) != serverLogBurst {
		t.Fatalf("%d server log lines for %d failed handshakes, want the burst of %d", len(lines), attempts, serverLogBurst)
	}
	if err, _ := lines[0]["err"].(string); !strings.Contains(err, "TLS handshake error") {
		t.Errorf("the line %v does not say what failed", lines[0])
	}
	if got := metricValue(t, n.serverLog.lines.WithLabelValues("suppressed")); got != attempts-serverLogBurst {
		t.Errorf("suppressed %v, want %d", got, attempts-serverLogBurst)
	}

	// Time refills the bucket; the next line counts what was left out.
	clock.Add(int64(time.Minute))
	failHandshake()
	lines = serverLines()
	if len(lines) != serverLogBurst+1 || lines[serverLogBurst]["suppressed"] != float64(attempts-serverLogBurst) {
		t.Errorf("after a minute: %d lines, the last %v", len(lines), lines[len(lines)-1])
	}
}

// The bucket: a burst, a refill at the rate, no refill when the clock
// goes backwards, never more than the burst.
func TestServerLogBucket(t *testing.T) {
	s := &serverLog{tokens: serverLogBurst}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range serverLogBurst {
		if _, ok := s.take(start); !ok {
			t.Fatalf("line %d of the burst refused", i)
		}
	}
	if _, ok := s.take(start); ok {
		t.Fatal("a line past the burst taken")
	}
	if _, ok := s.take(start.Add(-time.Hour)); ok {
		t.Fatal("a clock that went backwards refilled the bucket")
	}
	suppressed, ok := s.take(start.Add(time.Second / serverLogPerSecond))
	if !ok || suppressed != 2 {
		t.Fatalf("after one refill interval: %v, suppressed %d", ok, suppressed)
	}
	s.take(start.Add(time.Hour))
	if s.tokens > serverLogBurst {
		t.Errorf("the bucket holds %v, more than the burst", s.tokens)
	}
}
