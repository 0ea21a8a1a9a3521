package fleet

import (
	"context"
	"errors"
	"sort"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// etcdFailed counts a failed request and logs it when etcd answered the
// last request, or when this kind of failure is new since it did: one
// line per change of state, however long etcd stays away.
func (b *Broker) etcdFailed(op string, err error) {
	b.metrics.failure(op)
	b.metrics.up.Set(0)
	kind := failureKind(err)
	b.mu.Lock()
	changed := !b.failing[kind]
	b.failing[kind] = true
	b.mu.Unlock()
	if !changed {
		return
	}
	attrs := []any{"node", b.cfg.NodeID, "op", op, "endpoints", strings.Join(b.cfg.Client.Endpoints(), ","), "kind", kind, "error", err}
	said := err.Error()
	if kind == "timeout" {
		if cause := b.diagnose(); cause != "" {
			attrs = append(attrs, "connection", cause)
			said += " " + cause
		}
	}
	if closedByPeer(said) && !namesTLS(said) {
		// etcd closed a connection it had accepted: perhaps for the
		// client's certificate. A handshake of the broker's own says.
		if cause := tlsProbe(b.cfg.Client, b.cfg.RequestTimeout); cause != "" {
			attrs = append(attrs, "tls", cause)
		}
	}
	b.cfg.Logger.Warn("fleet: etcd request failed", attrs...)
}

// diagnose asks etcd once without waiting for a connection, so that a
// request that timed out waiting for one is logged with why the
// connection fails (refused, a certificate it does not trust). It runs
// only when a failure is logged, at most once per kind and episode.
func (b *Broker) diagnose() string {
	conn := b.cfg.Client.ActiveConnection()
	if conn == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	_, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return err.Error()
	}
	return ""
}

// etcdAnswered logs once that etcd answers again.
func (b *Broker) etcdAnswered() {
	b.metrics.up.Set(1)
	b.mu.Lock()
	var was []string
	for k, on := range b.failing {
		if on {
			was = append(was, k)
			b.failing[k] = false
		}
	}
	b.mu.Unlock()
	if len(was) > 0 {
		sort.Strings(was)
		b.cfg.Logger.Info("fleet: etcd answers again", "node", b.cfg.NodeID, "was", strings.Join(was, ","))
	}
}

// closedByPeer says whether an error's text is of a connection the peer
// closed (reset, a write to it refused, an end of stream): what a
// client certificate refused in TLS 1.3 looks like to gRPC.
func closedByPeer(s string) bool {
	return strings.Contains(s, "connection reset by peer") || strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}

// failureKinds are what failureKind returns.
var failureKinds = []string{"timeout", "tls", "unavailable", "closed", "error"}

// failureKind is the class of a failed request, which decides whether it
// is logged again.
func failureKind(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "deadline exceeded"):
		return "timeout"
	case strings.Contains(msg, "certificate") || strings.Contains(msg, "tls:") || strings.Contains(msg, "handshake"):
		return "tls"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "Unavailable") || strings.Contains(msg, "unavailable"):
		return "unavailable"
	case strings.Contains(msg, "client connection is closing") || errors.Is(err, context.Canceled):
		return "closed"
	}
	return "error"
}
