package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"latent.dev/admission/edge/latentd/demo"
)

// testCA is a certificate authority made by the test: nothing is
// committed.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "latentd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue writes a certificate for 127.0.0.1 with serial into dir and
// returns the two file names.
func (ca *testCA) issue(t *testing.T, dir string, serial int64) (certFile, keyFile string) {
	t.Helper()
	return ca.issueValid(t, dir, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// issueValid is issue for a certificate valid from notBefore to notAfter.
func (ca *testCA) issueValid(t *testing.T, dir string, serial int64, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// calmPolicy is the demonstration policy with overload thresholds no
// pressure reaches and a sample age no starved sampler reaches, so that a
// loaded test machine never turns a call into a 503.
func calmPolicy(t *testing.T) string {
	t.Helper()
	p := strings.Replace(string(demo.PolicyJSON()), `"cpu_threshold": 0.9`, `"cpu_threshold": 1`, 1)
	p = strings.Replace(p, `"memory_threshold": 0.85`, `"memory_threshold": 1`, 1)
	// A sample may be a minute old: a starved sampler goroutine on a
	// loaded machine must not turn a call into 503 load-unavailable.
	p = strings.Replace(p, `"maximum_observation_age_ms": 2000`, `"maximum_observation_age_ms": 60000`, 1)
	if !strings.Contains(p, `"cpu_threshold": 1,`) || !strings.Contains(p, `"memory_threshold": 1,`) ||
		!strings.Contains(p, `"maximum_observation_age_ms": 60000`) {
		t.Fatal("the demonstration policy's thresholds moved")
	}
	return writeFile(t, "policy.json", p)
}

func tlsClient(pool *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}}
}

func invokeWith(client *http.Client, url, token string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("world"))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Proto, nil
}

// TLS with HTTP/2; SIGHUP rotates a token under load and the certificate
// pair: no request gets a 5xx, the old token gets 401 after the reload,
// the new one 200, and new handshakes see the new certificate. A token
// file that fails to parse keeps the tokens in force, and is counted.
func TestTLSAndReloadOnSIGHUP(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.issue(t, dir, 100)
	tokens := tokenFile(t)
	s := serve(t, "-tokens", tokens, "-policy", calmPolicy(t), "-tls-cert", certFile, "-tls-key", keyFile)
	base := "https://" + s.addr
	url := base + "/v1/invoke/acme/hello/greet"
	client := tlsClient(ca.pool)
	defer client.CloseIdleConnections()

	status, proto, err := invokeWith(client, url, fileUserToken)
	if err != nil || status != http.StatusOK || proto != "HTTP/2.0" {
		t.Fatalf("first call: %d %s %v", status, proto, err)
	}

	// Load: callers with the old token until they see 401.
	var fivexx, calls atomic.Int64
	var wg sync.WaitGroup
	stopLoad := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tlsClient(ca.pool)
			defer c.CloseIdleConnections()
			for i := 0; i < 2000; i++ {
				select {
				case <-stopLoad:
					return
				default:
				}
				status, _, err := invokeWith(c, url, fileUserToken)
				calls.Add(1)
				if err != nil || status >= 500 {
					fivexx.Add(1)
					t.Errorf("during the rotation: %d %v", status, err)
				}
			}
		}()
	}
	for calls.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	const rotated = "rotated-alice"
	if err := os.WriteFile(tokens, []byte(`{"tokens":[
 {"sha256":"`+sha256Hex(rotated)+`","kind":"user","subject":"alice","tenant":"acme"},
 {"sha256":"`+sha256Hex(fileAdminToken)+`","admin":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	newCert, newKey := ca.issue(t, t.TempDir(), 200)
	copyFile(t, newCert, certFile)
	copyFile(t, newKey, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		status, _, err := invokeWith(client, url, fileUserToken)
		if err == nil && status == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old token still answers %d %v after the reload", status, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stopLoad)
	wg.Wait()
	if fivexx.Load() != 0 {
		t.Fatalf("%d of %d calls got a 5xx or failed during the rotation", fivexx.Load(), calls.Load())
	}
	if status, _, err := invokeWith(client, url, rotated); err != nil || status != http.StatusOK {
		t.Fatalf("the new token: %d %v", status, err)
	}
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	conn.Close()
	if serial != 200 {
		t.Errorf("a new handshake sees certificate %d, want the reloaded 200", serial)
	}

	// A token file that does not parse: the rotated token stays in force.
	if err := os.WriteFile(tokens, []byte(`{"tokens":[{"sha256":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	metrics := func() string {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+fileAdminToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	for !strings.Contains(metrics(), `latent_node_reloads_total{result="failed"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("no failed reload counted:\n%s", metrics())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := metrics(); !strings.Contains(m, `latent_node_reloads_total{result="ok"} 1`) {
		t.Errorf("the successful reload is not counted:\n%s", m)
	}
	if status, _, err := invokeWith(client, url, rotated); err != nil || status != http.StatusOK {
		t.Fatalf("after a refused reload the rotated token: %d %v", status, err)
	}
	client.CloseIdleConnections()
	s.end(t)
	if log := s.stderr.String(); !strings.Contains(log, "the token file is refused") || !strings.Contains(log, tokens) {
		t.Errorf("the refused reload is not logged with its file:\n%s", log)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Plain HTTP on an address that is not loopback needs -insecure-plaintext;
// without it latentd exits 2 before binding, and says why.
func TestPlaintextOffLoopbackNeedsTheFlag(t *testing.T) {
	tokens := tokenFile(t)
	var stderr bytes.Buffer
	if code := serveMain(t.Context(), []string{"-listen", "0.0.0.0:0", "-tokens", tokens}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "not a loopback address: give -tls-cert and -tls-key, or -insecure-plaintext") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if _, err := parseFlags([]string{"-listen", "0.0.0.0:0", "-tokens", tokens, "-insecure-plaintext"}, io.Discard); err != nil {
		t.Errorf("with -insecure-plaintext: %v", err)
	}
	if _, err := parseFlags([]string{"-tls-cert", "c.pem", "-tokens", tokens}, io.Discard); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Errorf("-tls-cert alone: %v", err)
	}
}

// In the pure demonstration, SIGHUP says there is nothing to reload.
func TestSIGHUPInTheDemonstration(t *testing.T) {
	s := serve(t)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(s.stderr.String(), "nothing to reload"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr: %s", s.stderr)
		}
	}
	s.end(t)
}

// A certificate outside its validity is refused at start (exit 1, naming
// the file) and at a reload, which keeps the pair in force, logs the
// refusal and counts it failed.
func TestACertificateOutsideItsValidityIsRefused(t *testing.T) {
	ca := newTestCA(t)
	tokens := tokenFile(t)
	expiredCert, expiredKey := ca.issueValid(t, t.TempDir(), 5, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	futureCert, futureKey := ca.issueValid(t, t.TempDir(), 6, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	for _, pair := range [][2]string{{expiredCert, expiredKey}, {futureCert, futureKey}} {
		ctx, cancel := context.WithCancel(context.Background())
		out := lineWriter{make(chan string, 64)}
		stderr := &lockedBuffer{}
		code := make(chan int, 1)
		go func() {
			code <- serveMain(ctx, []string{"-listen", "127.0.0.1:0", "-tokens", tokens, "-tls-cert", pair[0], "-tls-key", pair[1]}, out, stderr)
		}()
	wait:
		for {
			select {
			case c := <-code:
				if c != 1 || !strings.Contains(stderr.String(), pair[0]+": the certificate is valid from") {
					t.Errorf("%s: exit %d, stderr %q", pair[0], c, stderr.String())
				}
				break wait
			case line := <-out.lines:
				if strings.HasPrefix(line, "latentd: serving on") {
					t.Errorf("%s: served with a certificate outside its validity", pair[0])
					cancel()
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s: neither served nor exited", pair[0])
			}
		}
		cancel()
	}

	dir := t.TempDir()
	certFile, keyFile := ca.issue(t, dir, 7)
	s := serve(t, "-tokens", tokens, "-policy", calmPolicy(t), "-tls-cert", certFile, "-tls-key", keyFile)
	copyFile(t, expiredCert, certFile)
	copyFile(t, expiredKey, keyFile)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	client := tlsClient(ca.pool)
	defer client.CloseIdleConnections()
	metrics := func() string {
		req, _ := http.NewRequest(http.MethodGet, "https://"+s.addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+fileAdminToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(metrics(), `latent_node_reloads_total{result="failed"} 1`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the expired certificate's reload is not counted failed:\n%s", metrics())
		}
	}
	if m := metrics(); !strings.Contains(m, `latent_node_reloads_total{result="ok"} 0`) {
		t.Errorf("the expired certificate's reload counted ok:\n%s", m)
	}
	conn, err := tls.Dial("tcp", s.addr, &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("a handshake after the refused reload: %v", err)
	}
	serial := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	conn.Close()
	if serial != 7 {
		t.Errorf("a new handshake sees certificate %d, want the one in force, 7", serial)
	}
	client.CloseIdleConnections()
	s.end(t)
	if log := s.stderr.String(); !strings.Contains(log, "the certificate is refused") || !strings.Contains(log, "not now") {
		t.Errorf("the refused reload is not logged:\n%s", log)
	}
}
