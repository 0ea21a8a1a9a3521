// Package etcdproc starts a real single-member etcd (Debian's etcd-server,
// /usr/bin/etcd) on loopback ports in a directory of the caller's, for
// `make fleet` (latentd fleet-demo) and the tests of latentd and
// admissionctl that judge the fleet against a real etcd. It is not for
// production: the member has no TLS and no authentication.
package etcdproc

import (
	"bytes"
	"context"
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

// Proc is a running etcd.
type Proc struct {
	// Endpoint is its client URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	log      *syncBuffer
	exited   chan error // the process's exit, put back once read
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

// Start starts etcd with its data under dir and waits, at most patience,
// until it answers. A port taken between choosing and binding is retried
// on others, three times in all.
func Start(dir string, patience time.Duration) (*Proc, error) {
	if _, err := os.Stat(Binary); err != nil {
		return nil, ErrMissing
	}
	var lastErr error
	for i := range 3 {
		p, err := start(filepath.Join(dir, fmt.Sprintf("etcd-%d", i)), patience)
		if err == nil {
			return p, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(dir string, patience time.Duration) (*Proc, error) {
	cp, err := freePort()
	if err != nil {
		return nil, err
	}
	pp, err := freePort()
	if err != nil {
		return nil, err
	}
	client, peer := fmt.Sprintf("http://127.0.0.1:%d", cp), fmt.Sprintf("http://127.0.0.1:%d", pp)
	p := &Proc{Endpoint: client, log: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(Binary,
		"--name", "fleet", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "fleet="+peer, "--initial-cluster-state", "new",
		"--log-level", "warn", "--logger", "zap")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, Logger: zap.NewNop()})
	if err != nil {
		p.Stop()
		return nil, err
	}
	defer c.Close()
	for begin := time.Now(); time.Since(begin) < patience; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-p.exited:
			p.exited <- err
			return nil, fmt.Errorf("etcdproc: etcd exited (%v):\n%s", err, p.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Get(ctx, "health")
		cancel()
		if err == nil {
			return p, nil
		}
	}
	p.Stop()
	return nil, fmt.Errorf("etcdproc: etcd did not answer within %v:\n%s", patience, p.log.String())
}

// Pause stops the process (SIGSTOP): a partition from every client.
func (p *Proc) Pause() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues it (SIGCONT).
func (p *Proc) Resume() error { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Log is what etcd wrote (its first MiB).
func (p *Proc) Log() string { return p.log.String() }

// Stop kills etcd (continuing it first, were it paused) and waits for it
// to exit. It may be called more than once.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err
}
