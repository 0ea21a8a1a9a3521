package fleet

import (
	"bytes"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"latent.dev/admission/edge/fleet/etcdproc"
)

// patience bounds a wait for what must happen; it only bounds a hang.
const patience = 2 * time.Minute

// etcdServer is how a test reaches etcd: its endpoint and the CA the
// test's clients trust, and the process (etcdproc) when the test started
// one; proc is nil for an endpoint nothing serves.
type etcdServer struct {
	endpoint string
	tls      *etcdproc.TLSFiles // nil: plain HTTP
	cert     *etcdproc.TLSFiles // the client certificate presented; nil: none
	proc     *etcdproc.Proc
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
	if _, err := os.Stat(etcdproc.Binary); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: .ci/run installs etcd-server (%v)", etcdproc.Binary, err)
		}
		t.Skipf("%s is missing (apt-get install etcd-server): the fleet tests need a real etcd", etcdproc.Binary)
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

// startEtcd starts etcd (etcdproc) and waits until it answers; it is
// stopped when the test ends, its log written to a failing test's. With
// files it serves clients over TLS with files' certificate.
func startEtcd(t *testing.T, files *etcdproc.TLSFiles) *etcdServer {
	t.Helper()
	return startEtcdWith(t, etcdproc.Options{TLS: files})
}

// startEtcdWith is startEtcd with o's way of serving; with
// o.ClientCertAuth the test's clients present o.TLS's certificate.
func startEtcdWith(t *testing.T, o etcdproc.Options) *etcdServer {
	t.Helper()
	requireEtcd(t)
	p, err := etcdproc.StartWith(t.TempDir(), patience, o)
	if err != nil {
		t.Fatalf("etcd did not start: %v", err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("etcd's log:\n%s", p.Log())
		}
	})
	e := &etcdServer{endpoint: p.Endpoint, tls: o.TLS, proc: p}
	if o.ClientCertAuth {
		e.cert = o.TLS
	}
	return e
}

// client returns a new client of e, closed when the test ends.
func (e *etcdServer) client(t *testing.T) *clientv3.Client {
	t.Helper()
	o := ClientOptions{Endpoints: []string{e.endpoint}}
	if e.tls != nil {
		o.CAFile = e.tls.CA
	}
	if e.cert != nil {
		o.CertFile, o.KeyFile = e.cert.Cert, e.cert.Key
	}
	c, err := NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (e *etcdServer) pause(t *testing.T) {
	if err := e.proc.Pause(); err != nil {
		t.Fatal(err)
	}
}

func (e *etcdServer) resume(t *testing.T) {
	if err := e.proc.Resume(); err != nil {
		t.Fatal(err)
	}
}

// writeTLSFiles makes a CA named name and a certificate for 127.0.0.1 it
// signs (etcdproc.WriteTLS) in a directory of the test's.
func writeTLSFiles(t *testing.T, name string) *etcdproc.TLSFiles {
	t.Helper()
	f, err := etcdproc.WriteTLS(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
