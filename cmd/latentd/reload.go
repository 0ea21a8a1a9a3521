package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"latent.dev/admission/edge/latentd"
	"latent.dev/admission/internal/boundedfile"
)

// certificate is the TLS certificate in force: every handshake reads one
// whole pair, and a reload swaps the pair at once.
type certificate struct {
	certFile, keyFile string
	pair              atomic.Pointer[tls.Certificate]
}

func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// maxPEMBytes bounds a certificate chain's or a key's file.
const maxPEMBytes = 1 << 20

// reload reads the pair again; on an error the pair in force stays. The
// files are read as regular files only: a FIFO is refused, not waited
// on.
func (c *certificate) reload() error {
	certPEM, err := boundedfile.ReadRegular(c.certFile, maxPEMBytes)
	if err != nil {
		return fmt.Errorf("-tls-cert: %w", err)
	}
	keyPEM, err := boundedfile.ReadRegular(c.keyFile, maxPEMBytes)
	if err != nil {
		return fmt.Errorf("-tls-key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("-tls-cert %s, -tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil { // GODEBUG=x509keypairleaf=0 leaves it unparsed
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("-tls-cert %s: %w", c.certFile, err)
		}
	}
	// Every client would refuse a certificate outside its validity: the
	// pair in force (or none, at start) is better than one that fails
	// every handshake.
	if now := time.Now(); now.Before(pair.Leaf.NotBefore) || now.After(pair.Leaf.NotAfter) {
		return fmt.Errorf("-tls-cert %s: the certificate is valid from %s to %s, not now (%s)", c.certFile,
			pair.Leaf.NotBefore.UTC().Format(time.RFC3339), pair.Leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	c.pair.Store(&pair)
	return nil
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.pair.Load(), nil }

// onReload rereads the token file and the certificate pair at each
// SIGHUP that hup delivers until the returned stop is called. A file that
// fails keeps what it replaced in force and is logged, naming the file
// and the problem; running requests and activations are untouched. Each
// reload is counted in latent_node_reloads_total.
func onReload(s *started, o options, logger *slog.Logger, hup <-chan os.Signal) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-hup:
				reload(s, o, logger)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

func reload(s *started, o options, logger *slog.Logger) {
	if o.tokens == "" && s.cert == nil {
		logger.Info("latentd: SIGHUP: nothing to reload (the demonstration has no token file and no certificate)")
		return
	}
	ok := true
	if o.tokens != "" {
		tokens, err := latentd.LoadTokens(o.tokens)
		if err != nil {
			ok = false
			logger.Error("latentd: reload: the token file is refused; the tokens in force stay", "file", o.tokens, "err", err.Error())
		} else {
			s.node.SetTokens(tokens)
		}
	}
	if s.cert != nil {
		if err := s.cert.reload(); err != nil {
			ok = false
			logger.Error("latentd: reload: the certificate is refused; the one in force stays", "file", o.tlsCert, "err", err.Error())
		}
	}
	s.node.ReloadDone(ok)
	if ok {
		logger.Info("latentd: reloaded", "tokens", o.tokens, "certificate", o.tlsCert)
	}
}
