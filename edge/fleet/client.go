package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ClientOptions say how to reach etcd.
type ClientOptions struct {
	// Endpoints are etcd's client URLs (http:// or https://).
	Endpoints []string
	// CAFile is the PEM file of the CAs that sign etcd's server
	// certificate; set, the client speaks TLS and trusts only them.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key in PEM,
	// for etcd's client certificate authentication; both or neither.
	CertFile, KeyFile string
	// KeepAliveTime is the gRPC keep-alive probe interval of the
	// connection (default 2s), so a connection to a dead etcd is noticed.
	KeepAliveTime time.Duration
}

// NewClient returns an etcd client for o. It does not wait for a
// connection: an unreachable etcd shows up as failing requests, which the
// broker logs and backs off from. A TLS file that cannot be read or
// parsed is an error naming the file.
func NewClient(o ClientOptions) (*clientv3.Client, error) {
	if len(o.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", ErrConfig)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both a certificate file and a key file", ErrConfig)
	}
	cfg := clientv3.Config{
		Endpoints:            o.Endpoints,
		DialKeepAliveTime:    o.KeepAliveTime,
		DialKeepAliveTimeout: o.KeepAliveTime,
		Logger:               zap.NewNop(),
	}
	if cfg.DialKeepAliveTime == 0 {
		cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout = 2*time.Second, 2*time.Second
	}
	if o.CAFile != "" || o.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: etcd CA file: %v", ErrConfig, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: etcd CA file %q holds no PEM certificate", ErrConfig, o.CAFile)
			}
			tc.RootCAs = pool
		}
		if o.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%w: etcd client certificate %q and key %q: %v", ErrConfig, o.CertFile, o.KeyFile, err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd client for %v: %w", o.Endpoints, err)
	}
	if cfg.TLS != nil {
		clientTLS.Store(c, cfg.TLS.Clone())
		context.AfterFunc(c.Ctx(), func() { clientTLS.Delete(c) })
	}
	return c, nil
}

// clientTLS holds the TLS configuration of each client NewClient made,
// until the client is closed, for tlsProbe.
var clientTLS sync.Map // *clientv3.Client → *tls.Config

// namesTLS says whether an error's text names a TLS or certificate
// problem.
func namesTLS(s string) bool {
	return strings.Contains(s, "certificate") || strings.Contains(s, "tls:") || strings.Contains(s, "x509")
}

// tlsProbe makes a TLS handshake of its own with each https endpoint of
// c, with c's TLS configuration (a client NewClient made; "" for
// another), and returns the first failure that names TLS, with its
// endpoint. In TLS 1.3 the client's handshake ends before the server has
// judged the client's certificate: a server that refuses it sends an
// alert and closes, and the gRPC connection, which has already written,
// often sees only "connection reset by peer" or "broken pipe". The
// probe writes nothing and reads the alert ("remote error: tls: bad
// certificate"). Each step is bounded by timeout; a server that accepts
// the certificate ends the read with data, or with the timeout.
func tlsProbe(c *clientv3.Client, timeout time.Duration) string {
	v, ok := clientTLS.Load(c)
	if !ok {
		return ""
	}
	for _, ep := range c.Endpoints() {
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "https" {
			continue
		}
		cfg := v.(*tls.Config).Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"h2"}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", u.Host)
		cancel()
		if err == nil {
			_ = conn.SetReadDeadline(time.Now().Add(timeout))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err != nil && namesTLS(err.Error()) {
			return ep + ": " + err.Error()
		}
	}
	return ""
}
