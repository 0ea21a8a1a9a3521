package fleet

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdBinary is Debian's etcd-server (.ci/run installs it).
const etcdBinary = "/usr/bin/etcd"

// patience bounds a wait for what must happen; it only bounds a hang.
const patience = 2 * time.Minute

// etcdServer is a real etcd process on loopback ports in a temporary
// directory, stopped when the test ends.
type etcdServer struct {
	cmd      *exec.Cmd
	endpoint string
	log      *syncBuffer
	tls      *tlsFiles // nil: plain HTTP
	args     []string
	exited   chan error // the process's exit, put back once read
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// requireEtcd skips without the etcd binary, unless CI is set: CI installs
// it, so there its absence fails.
func requireEtcd(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(etcdBinary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: .ci/run installs etcd-server (%v)", etcdBinary, err)
		}
		t.Skipf("%s is missing (apt-get install etcd-server): the fleet tests need a real etcd", etcdBinary)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEtcd starts etcd and waits until it answers. With files it serves
// clients over TLS with files' server certificate.
func startEtcd(t *testing.T, files *tlsFiles) *etcdServer {
	t.Helper()
	requireEtcd(t)
	var lastErr error
	for range 3 { // a port taken between freePort and etcd's bind: try others
		e, err := tryStartEtcd(t, files)
		if err == nil {
			return e
		}
		lastErr = err
	}
	t.Fatalf("etcd did not start: %v", lastErr)
	return nil
}

func tryStartEtcd(t *testing.T, files *tlsFiles) (*etcdServer, error) {
	dir := t.TempDir()
	scheme := "http"
	if files != nil {
		scheme = "https"
	}
	client := fmt.Sprintf("%s://127.0.0.1:%d", scheme, freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	args := []string{
		"--name", "fleet-test", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "fleet-test=" + peer, "--initial-cluster-state", "new",
		"--log-level", "warn", "--logger", "zap",
	}
	if files != nil {
		args = append(args, "--cert-file", files.serverCert, "--key-file", files.serverKey)
	}
	e := &etcdServer{endpoint: client, log: &syncBuffer{}, tls: files, args: args}
	if err := e.launch(t); err != nil {
		return nil, err
	}
	return e, nil
}

// launch starts the etcd process with e's arguments and waits until it
// answers, or until it exits.
func (e *etcdServer) launch(t *testing.T) error {
	e.cmd = exec.Command(etcdBinary, e.args...)
	e.cmd.Stdout, e.cmd.Stderr = e.log, e.log
	if err := e.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	e.exited = exited
	cmd := e.cmd
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		err := <-exited
		exited <- err
		if t.Failed() {
			t.Logf("etcd's log:\n%s", e.log.String())
		}
	})
	c := e.client(t)
	for start := time.Now(); time.Since(start) < patience; {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("etcd exited (%v):\n%s", err, e.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("etcd did not answer within %v:\n%s", patience, e.log.String())
}

// client returns a new client of e, closed when the test ends.
func (e *etcdServer) client(t *testing.T) *clientv3.Client {
	t.Helper()
	o := ClientOptions{Endpoints: []string{e.endpoint}}
	if e.tls != nil {
		o.CAFile = e.tls.caCert
	}
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *etcdServer) pause(t *testing.T) {
	if err := e.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

func (e *etcdServer) resume(t *testing.T) {
	if err := e.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// tlsFiles are a CA and a server certificate for 127.0.0.1 it signs, in
// PEM files.
type tlsFiles struct {
	caCert, serverCert, serverKey string
}

func writeTLSFiles(t *testing.T, name string) *tlsFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caParsed, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caParsed, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	f := &tlsFiles{caCert: filepath.Join(dir, "ca.pem"), serverCert: filepath.Join(dir, "server.pem"), serverKey: filepath.Join(dir, "server-key.pem")}
	write := func(path, kind string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(f.caCert, "CERTIFICATE", caDER)
	write(f.serverCert, "CERTIFICATE", srvDER)
	write(f.serverKey, "EC PRIVATE KEY", keyDER)
	return f
}
