package latentd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/boundedfile"
	"latent.dev/admission/internal/trace"
	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/policy"
)

// Defaults.
const (
	DefaultListen             = "127.0.0.1:8080"
	DefaultRetryAfterSeconds  = uint32(1)
	DefaultShutdownGrace      = 10 * time.Second
	DefaultMaxDeploymentBytes = 1 << 20
	// MinRecordMaxBytes is the least positive RecordMaxBytes: a shutdown
	// drains the recorder's queue (at most trace.DefaultBufferBytes, 64
	// MiB), rotating every RecordMaxBytes, and each rotation is an fsync,
	// a rename and an open. At 1 MiB that is at most 65 rotations, well
	// within the unit's TimeoutStopSec=30 (docs/record-and-shadow.md:
	// 0.6 s to close a full queue measured); at 1 byte it was one per
	// line, and shutdown took 32 s.
	MinRecordMaxBytes        = 1 << 20
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 16 << 10
	// DefaultMaxConnections and DefaultMaxConnectionsPerClient cap the
	// connections Serve holds open (connlimit.go): 4096 idle HTTP/2
	// connections are about 170 MiB and well under the descriptors a
	// systemd service gets.
	DefaultMaxConnections          = 4096
	DefaultMaxConnectionsPerClient = 256
)

// Config is a node's configuration. Policy, Tokens and Guests are
// required; everything else has a default.
type Config struct {
	// Policy is the node admission policy.
	Policy *policy.NodeAdmissionPolicy
	// StoreDir is the catalog store. A directory that is missing or holds
	// no store starts an empty catalog there; one held by another open
	// catalog fails New with catalog.ErrStoreInUse. Empty: the catalog
	// lives in memory, starting from Deployments.
	StoreDir string
	// Capacity bounds a catalog New creates (a fresh store, or the
	// in-memory one); zero is catalog.GenerousCapacity.
	Capacity catalog.Capacity
	// Deployments seed the in-memory catalog (ignored with StoreDir).
	Deployments []catalog.Deployment
	// Tokens are the bearer tokens.
	Tokens *Tokens
	// Guests run the guests and hold their artifacts.
	Guests Guests
	// RetryAfter is the Retry-After of retryable rejections, in whole
	// seconds, per reason; a reason not listed gets
	// DefaultRetryAfterSeconds. It never depends on load or counters.
	RetryAfter map[core.Reason]uint32
	// Load says where the sampler reads; the zero value is this machine's
	// /proc and cgroup.
	Load loadsampler.Files
	// SampleInterval is the sampler's interval; zero is a quarter of the
	// policy's maximum observation age.
	SampleInterval time.Duration
	// ShutdownGrace is how long Shutdown lets running activations finish
	// before it interrupts them; zero is DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// MaxDeploymentBytes bounds a deployment upload; zero is the
	// default. (Artifacts are bounded by the guest runtime.)
	MaxDeploymentBytes int64
	// Server timeouts against slow clients; zero is the default.
	// ReadTimeout and WriteTimeout default to the node's wall-time
	// ceiling plus ten seconds, so a request that may legitimately run
	// that long is not cut off.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxConnections caps the connections Serve holds open at once, and
	// MaxConnectionsPerClient those from one client (an IP address, or
	// an IPv6 /64); a connection past either is closed as soon as it is
	// accepted and counted in latent_node_connections_refused_total.
	// Zero is the default.
	MaxConnections          int
	MaxConnectionsPerClient int
	// AllowedHosts are the host names, besides loopback addresses and
	// localhost, that a request's Host may name on administrator
	// endpoints, the status API and /debug/ (the Host rule, host.go);
	// compared without case and without the port.
	AllowedHosts []string
	// Logger receives the node's log lines; nil is slog.Default().
	Logger *slog.Logger
	// TLSConfig, when not nil, makes Serve speak TLS (and HTTP/2) with
	// it; its GetCertificate may hand out a certificate that a reload
	// replaces.
	TLSConfig *tls.Config
	// AccessLog, when not nil, receives one line per answered request
	// (answer.go, logAccess): method, path pattern, the tenant, service
	// and route once validated, the activation ID, status, outcome or
	// rejection reason, duration and bytes in and out. Nil logs none.
	AccessLog *slog.Logger
	// RecordPath, when set, records every admission decision, and what
	// a replay needs besides (the catalog and its changes, load samples,
	// starts and releases), to this trace file (record.go,
	// internal/trace): created, or truncated. Recording builds the
	// provider with core.NewRecordingProvider, whose ledger runs in one
	// total order. Empty records nothing, at no cost.
	RecordPath string
	// RecordMaxBytes, when positive, rotates the trace once its file has
	// reached this many bytes: the file becomes RecordPath.1 (replacing
	// an older one) and a new one begins. Zero is no rotation.
	RecordMaxBytes int64
	// RecordPolicySHA256 is the SHA-256 (hex) of the policy file's bytes,
	// for the trace's header; empty when the caller has no file.
	RecordPolicySHA256 string
	// Fleet, when not nil, runs the fleet broker on etcd for the tenants
	// the policy's fleet block marks (fleet.go, docs/fleet.md). Nil with
	// such tenants refuses them (fleet-unavailable), logged once at start.
	Fleet *FleetConfig
	// recordCreate, when set, opens the trace file instead of the file
	// system (a test's seam: a full disk).
	recordCreate func(path string) (trace.File, error)
}

func (c *Config) setDefaults(ceiling time.Duration) error {
	if c.Policy == nil {
		return errors.New("latentd: a policy is required")
	}
	if c.Tokens == nil {
		return errors.New("latentd: a token file is required")
	}
	if c.Guests == nil {
		return errors.New("latentd: a guest runtime is required")
	}
	if c.RecordMaxBytes < 0 {
		return errors.New("latentd: RecordMaxBytes must not be negative")
	}
	if c.RecordMaxBytes > 0 && c.RecordMaxBytes < MinRecordMaxBytes {
		return fmt.Errorf("latentd: RecordMaxBytes must be 0 (no rotation) or at least %d", MinRecordMaxBytes)
	}
	if c.RecordPath != "" {
		// The trace is created or truncated: a FIFO there would block
		// the opening, before the node listens, until it got a reader.
		if err := boundedfile.CheckRegular(c.RecordPath); err != nil {
			return fmt.Errorf("latentd: record: %w", err)
		}
	}
	if c.Capacity == (catalog.Capacity{}) {
		c.Capacity = catalog.GenerousCapacity
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.MaxDeploymentBytes <= 0 {
		c.MaxDeploymentBytes = DefaultMaxDeploymentBytes
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = ceiling + 10*time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = ceiling + 10*time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxConnectionsPerClient <= 0 {
		c.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
