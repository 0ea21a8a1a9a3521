package latentd

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection caps. An idle connection costs the node a descriptor and a
// few tens of KiB (an HTTP/2 one more), and IdleTimeout only closes it
// after a minute, so a client that opens connections faster than that
// would exhaust the node's descriptors and memory: the listener closes a
// connection past either cap as soon as it is accepted, before a byte of
// it is read. A client is its IP address, and an IPv6 client its /64
// (one host usually holds a whole /64).

// connLimiter counts the open connections, in total and per client, and
// refuses those past its caps. Fields up to mu never change.
type connLimiter struct {
	maxTotal, maxPerClient int
	open                   prometheus.Gauge
	refused                *prometheus.CounterVec

	mu        sync.Mutex
	total     int            // guarded by mu
	perClient map[string]int // open connections per client key; guarded by mu
}

// The reasons of latent_node_connections_refused_total.
const (
	refusedTotal     = "total"
	refusedPerClient = "per_client"
)

func newConnLimiter(maxTotal, maxPerClient int, registry *prometheus.Registry) (*connLimiter, error) {
	c := &connLimiter{maxTotal: maxTotal, maxPerClient: maxPerClient, perClient: map[string]int{},
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "latent_node_connections_open",
			Help: "Connections the node holds open (accepted and not yet closed)."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latent_node_connections_refused_total",
			Help: "Connections closed as soon as accepted: past the node's cap (total) or past one client's (per_client)."}, []string{"reason"}),
	}
	c.refused.WithLabelValues(refusedTotal)
	c.refused.WithLabelValues(refusedPerClient)
	for _, m := range []prometheus.Collector{c.open, c.refused} {
		if err := registry.Register(m); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// clientKey is the address a connection counts against: its IP, or the
// /64 of an IPv6 one; a remote address that is not IP counts as one
// client of its own kind.
func clientKey(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.Network()
	}
	if ip4 := tcp.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return tcp.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// admit counts a new connection from key, or reports why it is refused.
func (c *connLimiter) admit(key string) (refusal string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total >= c.maxTotal:
		return refusedTotal
	case c.perClient[key] >= c.maxPerClient:
		return refusedPerClient
	}
	c.total++
	c.perClient[key]++
	c.open.Inc()
	return ""
}

func (c *connLimiter) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if c.perClient[key]--; c.perClient[key] == 0 {
		delete(c.perClient, key)
	}
	c.open.Dec()
}

// limitListener closes every connection its limiter refuses and hands
// on the others, which release their place when closed.
type limitListener struct {
	net.Listener
	limiter *connLimiter
}

func (l limitListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(conn.RemoteAddr())
		if refusal := l.limiter.admit(key); refusal != "" {
			// Counted before the close, which the client may see
			// before anything else happens here.
			l.limiter.refused.WithLabelValues(refusal).Inc()
			_ = conn.Close()
			continue
		}
		return &limitedConn{Conn: conn, limiter: l.limiter, key: key}, nil
	}
}

// limitedConn gives its place back once, at its first Close.
type limitedConn struct {
	net.Conn
	limiter *connLimiter
	key     string
	once    sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limiter.release(c.key) })
	return err
}
