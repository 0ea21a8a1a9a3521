// Package etcdproc starts a real single-member etcd (Debian's etcd-server,
// /usr/bin/etcd) on loopback ports in a directory of the caller's, for
// `make fleet` (latentd fleet-demo) and the tests that judge the fleet
// against a real etcd (edge/fleet's, latentd's and admissionctl's). It is
// not for production: the member has no authentication, and its TLS
// (Options.TLS) uses files WriteTLS makes for a test.
package etcdproc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary is where Debian's etcd-server puts etcd.
const Binary = "/usr/bin/etcd"

// ErrMissing is returned by Start when the etcd binary is not there.
var ErrMissing = errors.New("etcdproc: " + Binary + " is missing (apt-get install etcd-server)")

// Options say how etcd serves its clients.
type Options struct {
	// TLS, when set, makes etcd serve clients over TLS (https://) with
	// TLS.Cert and TLS.Key; nil serves plain HTTP.
	TLS *TLSFiles
	// ClientCertAuth makes etcd require a client certificate signed by
	// TLS.CA (etcd's --client-cert-auth); it needs TLS.
	ClientCertAuth bool
}

// Proc is a running etcd. Its methods are not for concurrent use.
type Proc struct {
	// Endpoint is its client URL, http://127.0.0.1:PORT, or https://
	// with Options.TLS.
	Endpoint string
	// TLS is Options.TLS: the CA a client trusts, and a certificate it
	// can present (etcd's own, which is also a client certificate).
	TLS *TLSFiles

	args   []string
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error // the process's exit, put back once read
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 { // bounded: keep the start, which says why it failed
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts etcd serving plain HTTP with its data under dir and waits,
// at most patience, until it answers. A port taken between choosing and
// binding is retried on others, three times in all.
func Start(dir string, patience time.Duration) (*Proc, error) {
	return StartWith(dir, patience, Options{})
}

// StartWith is Start with o's way of serving clients.
func StartWith(dir string, patience time.Duration, o Options) (*Proc, error) {
	if _, err := os.Stat(Binary); err != nil {
		return nil, ErrMissing
	}
	if o.ClientCertAuth && o.TLS == nil {
		return nil, errors.New("etcdproc: ClientCertAuth needs TLS")
	}
	var lastErr error
	for i := range 3 {
		p, err := start(filepath.Join(dir, fmt.Sprintf("etcd-%d", i)), patience, o)
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(dir string, patience time.Duration, o Options) (*Proc, error) {
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	client, peer := fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp), fmt.Sprintf("http://127.0.0.1:%d", pp)
	p := &Proc{Endpoint: client, TLS: o.TLS, log: &syncBuffer{}}
	p.args = []string{
		"--name", "fleet", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "fleet=" + peer, "--initial-cluster-state", "new",
		"--log-level", "warn", "--logger", "zap"}
	if o.TLS != nil {
		p.args = append(p.args, "--cert-file", o.TLS.Cert, "--key-file", o.TLS.Key)
		if o.ClientCertAuth {
			p.args = append(p.args, "--client-cert-auth", "--trusted-ca-file", o.TLS.CA)
		}
	}
	if err := p.launch(patience); err != nil {
		return nil, err
	}
	return p, nil
}

// launch starts the process with p's arguments and waits, at most
// patience, until it answers, or until it exits.
func (p *Proc) launch(patience time.Duration) error {
	p.cmd = exec.Command(Binary, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return err
	}
	exited, cmd := make(chan error, 1), p.cmd
	p.exited = exited
	go func() { exited <- cmd.Wait() }()
	cfg := clientv3.Config{Endpoints: []string{p.Endpoint}, Logger: zap.NewNop()}
	if p.TLS != nil {
		tc, err := p.TLS.ClientConfig()
		if err != nil {
			p.Stop()
			return err
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		p.Stop()
		return err
	}
	defer c.Close()
	for begin := time.Now(); time.Since(begin) < patience; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("etcdproc: etcd exited (%v):\n%s", err, p.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
	}
	p.Stop()
	return fmt.Errorf("etcdproc: etcd did not answer within %v:\n%s", patience, p.log.String())
}

// Pause stops the process (SIGSTOP): a partition from every client.
func (p *Proc) Pause() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues it (SIGCONT).
func (p *Proc) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Log is what etcd wrote (its first MiB, across restarts).
func (p *Proc) Log() string { return p.log.String() }

// Stop kills etcd (continuing it first, were it paused) and waits for it
// to exit. It may be called more than once.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err
}

// Restart kills etcd if it still runs (Stop), starts it again on the
// same data and ports, and waits at most patience until it answers.
func (p *Proc) Restart(patience time.Duration) error {
	p.Stop()
	return p.launch(patience)
}

// ClientConfig is a client's TLS configuration for an etcd serving with
// f: it trusts f.CA and presents f.Cert.
func (f *TLSFiles) ClientConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("etcdproc: %s holds no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
