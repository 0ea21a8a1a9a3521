package fleet

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Sink is where the broker publishes a node's slice of a tenant's fleet
// limit: admission may hold at most slice live activations of the tenant,
// and admits none at or after validUntil, a reading of the monotonic
// clock (a time.Time from time.Now plus a duration). A slice of 0 with
// a zero validUntil withdraws it. The broker calls Publish for one tenant
// at a time with its own lock held: Publish must not block or call back
// into the broker.
type Sink interface {
	Publish(tenant string, slice int64, validUntil time.Time)
}

// Usage is what the broker reads to state a node's wants: the tenant's
// live activations on this node now, and how many requests of the
// tenant admission has refused for a full slice so far (a count that
// only grows).
type Usage interface {
	Live(tenant string) int64
	Refused(tenant string) uint64
}

// Tenant is one fleet-limited tenant.
type Tenant struct {
	// Name is the tenant's ID, as in the policy; it becomes a segment of
	// etcd keys, so it may not be empty or hold a '/'.
	Name string
	// MaxGrant is the longest wall time a permit of the tenant can be
	// granted: its activation, admitted just before the slice's local
	// deadline, ends within MaxGrant of it. It is part of the margin
	// between the local deadline and the lease's expiry in etcd.
	MaxGrant time.Duration
}

// Config configures a [Broker]. Zero durations and fractions take the
// defaults in docs/fleet.md.
type Config struct {
	// Client is the etcd client; the broker does not close it.
	Client *clientv3.Client
	// NodeID names this node's slice keys; unique in the fleet, no '/'.
	NodeID string
	// Tenants are the fleet-limited tenants.
	Tenants []Tenant
	// Sink receives the slices; Usage states the wants.
	Sink  Sink
	Usage Usage
	// Prefix is the root of the broker's keys (default /latent/fleet/):
	// Prefix+"limits/"+tenant holds the limit, Prefix+"slices/"+tenant+"/"
	// +node each node's slice.
	Prefix string
	// TTL is the etcd lease's time to live, whole seconds (default 10s).
	TTL time.Duration
	// Slack covers the lease's timing slack: the rate difference of the
	// node's and etcd's clocks over a TTL and the time between an
	// activation's end and its release (default 500ms).
	Slack time.Duration
	// KeepAlive is the interval between keep-alives (default TTL/5).
	KeepAlive time.Duration
	// Refresh is the interval between allocation rounds (default 1s).
	Refresh time.Duration
	// RequestTimeout bounds each request to etcd (default KeepAlive).
	RequestTimeout time.Duration
	// BackoffMax caps the back-off between failed attempts to get a
	// lease (default 10s); keep-alives retry at most every KeepAlive.
	BackoffMax time.Duration
	// AheadFraction and MinAhead size the margin a node asks for above
	// its live count (defaults 0.1 and 1).
	AheadFraction float64
	MinAhead      int64
	// MaxNodes bounds the slices per tenant the broker reads (default
	// 1024); a tenant with more fails closed.
	MaxNodes int
	// Logger receives the state changes; nil is slog.Default().
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	cfg := *c
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	if cfg.Client == nil {
		return bad("Client is nil")
	}
	if cfg.Sink == nil || cfg.Usage == nil {
		return bad("Sink and Usage are required")
	}
	if !validSegment(cfg.NodeID) {
		return bad("NodeID %q must be non-empty, printable and hold no '/'", cfg.NodeID)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/latent/fleet/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		return bad("Prefix %q must end in '/'", cfg.Prefix)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.TTL, 10*time.Second)
	def(&cfg.Slack, 500*time.Millisecond)
	def(&cfg.KeepAlive, cfg.TTL/5)
	def(&cfg.Refresh, time.Second)
	def(&cfg.RequestTimeout, cfg.KeepAlive)
	def(&cfg.BackoffMax, 10*time.Second)
	if cfg.AheadFraction == 0 {
		cfg.AheadFraction = 0.1
	}
	if cfg.MinAhead == 0 {
		cfg.MinAhead = 1
	}
	if cfg.MaxNodes == 0 {
		cfg.MaxNodes = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TTL < 2*time.Second || cfg.TTL%time.Second != 0 {
		return bad("TTL %v must be whole seconds, at least 2s (etcd's smallest lease)", cfg.TTL)
	}
	if cfg.Slack < 0 || cfg.KeepAlive <= 0 || cfg.Refresh <= 0 || cfg.RequestTimeout <= 0 || cfg.BackoffMax <= 0 {
		return bad("Slack, KeepAlive, Refresh, RequestTimeout and BackoffMax must be positive")
	}
	if !(cfg.AheadFraction > 0 && cfg.AheadFraction <= 1) || cfg.MinAhead < 0 || cfg.MaxNodes < 1 {
		return bad("AheadFraction must be in (0, 1], MinAhead not negative, MaxNodes positive")
	}
	seen := make(map[string]bool, len(cfg.Tenants))
	cfg.Tenants = append([]Tenant(nil), cfg.Tenants...)
	for _, t := range cfg.Tenants {
		if !validSegment(t.Name) || seen[t.Name] {
			return bad("tenant %q: a name must be unique, non-empty, printable and hold no '/'", t.Name)
		}
		seen[t.Name] = true
		if t.MaxGrant <= 0 {
			return bad("tenant %q: MaxGrant must be positive", t.Name)
		}
		// A renewal must land before the slice lapses even when one
		// keep-alive takes its whole timeout.
		if usable := cfg.TTL - t.MaxGrant - cfg.Slack; usable <= cfg.KeepAlive+cfg.RequestTimeout {
			return bad("tenant %q: TTL %v less MaxGrant %v and Slack %v leaves %v, not more than KeepAlive %v plus RequestTimeout %v: the slice would lapse between keep-alives",
				t.Name, cfg.TTL, t.MaxGrant, cfg.Slack, usable, cfg.KeepAlive, cfg.RequestTimeout)
		}
	}
	return cfg, nil
}

func validSegment(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r == '/' || r < 0x21 || r == 0x7f {
			return false
		}
	}
	return true
}
