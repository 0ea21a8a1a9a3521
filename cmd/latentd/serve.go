package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/edge/latentd"
	"latent.dev/admission/edge/latentd/demo"
	"latent.dev/admission/internal/boundedfile"
	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// The demonstration (edge/latentd/demo): a policy, a catalog of one
// deployment (acme/hello, route greet), a token file and the guest it
// runs. Its tokens:
const (
	DemoUserToken  = demo.UserToken  // alice, tenant acme
	DemoAdminToken = demo.AdminToken // an administrator
)

// options are the command's flags.
type options struct {
	policy, store, artifacts, tokens, listen string
	allowedHosts                             []string
	retryAfter                               map[core.Reason]uint32
	grace                                    time.Duration
	maxResponseBytes                         int64
	fuelPerMillisecond                       uint64
	logFormat                                string
	accessLog                                bool
	tlsCert, tlsKey                          string
	insecurePlaintext                        bool
	record                                   string
	recordMaxBytes                           int64
	maxConnections, maxConnectionsPerClient  int
	// The fleet broker's etcd (docs/fleet.md): none without -etcd.
	etcd                      []string
	etcdCA, etcdCert, etcdKey string
	nodeID                    string
	fleetLeaseTTL             time.Duration
}

// newLogger is the node's logger on w in the format -log-format names.
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("latentd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.policy, "policy", "", "node policy `FILE` (default: the embedded demonstration policy)")
	fs.StringVar(&o.store, "store", "", "catalog store `DIR`; an empty or missing one starts an empty catalog (default: the demonstration catalog, in memory)")
	fs.StringVar(&o.artifacts, "artifacts", "", "artifact `DIR` (ARTIFACTS/sha256/<hex>.wasm; required with -store; default: a temporary one holding the demonstration guest)")
	fs.StringVar(&o.tokens, "tokens", "", "token `FILE` (required unless this is the pure demonstration: no -policy, -store or -artifacts, a loopback -listen)")
	fs.StringVar(&o.listen, "listen", latentd.DefaultListen, "listen `ADDR`")
	fs.Func("allowed-host", "a `NAME` that Host may give, besides loopback addresses and localhost, on administrator endpoints, the status API and /debug/ (repeatable)",
		func(name string) error {
			if name == "" || strings.ContainsAny(name, "/ ") {
				return errors.New("must be a host name or an IP address")
			}
			if _, _, err := net.SplitHostPort(name); err == nil {
				return errors.New("a name without a port: the port is never compared")
			}
			o.allowedHosts = append(o.allowedHosts, name)
			return nil
		})
	retry := fs.String("retry-after", "", "Retry-After seconds per reason, `REASON=SECONDS,...` (default 1 for every retryable reason)")
	fs.DurationVar(&o.grace, "grace", latentd.DefaultShutdownGrace, "how long running activations may finish after SIGTERM or SIGINT")
	fs.Int64Var(&o.maxResponseBytes, "max-response-bytes", 1<<20, "bound on a guest's standard output (the response body)")
	fs.Uint64Var(&o.fuelPerMillisecond, "fuel-per-ms", 0, "CPU fuel one millisecond of guest execution burns (0: edge/guest's default)")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "serve TLS (and HTTP/2) with the certificate chain in PEM `FILE`; reloaded on SIGHUP")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the private key of -tls-cert, in PEM `FILE`")
	fs.BoolVar(&o.insecurePlaintext, "insecure-plaintext", false, "allow plain HTTP on an address that is not loopback (bearer tokens then cross the network in clear)")
	fs.StringVar(&o.logFormat, "log-format", "text", "the log's and the access log's `FORMAT` on standard error: text or json")
	fs.BoolVar(&o.accessLog, "access-log", true, "log one line per answered request (method, path pattern, validated tenant, service, route and activation ID, status, outcome or reason, duration, bytes)")
	fs.StringVar(&o.record, "record", "", "record every admission decision, and what a replay needs, to the trace `FILE` (JSON lines; created or truncated; docs/record-and-shadow.md)")
	fs.Int64Var(&o.recordMaxBytes, "record-max-bytes", 0, "rotate the -record file once it reaches `N` bytes: FILE becomes FILE.1 (replacing an older one) and a new FILE begins (0: no rotation; else at least 1048576)")
	fs.IntVar(&o.maxConnections, "max-connections", latentd.DefaultMaxConnections, "the most connections the node holds open at once; past it a new one is closed as soon as accepted")
	fs.IntVar(&o.maxConnectionsPerClient, "max-connections-per-client", latentd.DefaultMaxConnectionsPerClient,
		"the most connections one client (an IP address, or an IPv6 /64) holds open at once; behind a proxy on this host every client is the proxy's")
	etcd := fs.String("etcd", "", "etcd client `ENDPOINTS` (comma-separated URLs, http:// or https://) of the fleet broker, for the tenants the policy's fleet block marks (docs/fleet.md); without it those tenants are refused")
	fs.StringVar(&o.etcdCA, "etcd-ca", "", "PEM `FILE` of the CAs that sign etcd's server certificate (TLS to etcd)")
	fs.StringVar(&o.etcdCert, "etcd-cert", "", "client certificate PEM `FILE` for etcd's client certificate authentication (with -etcd-key)")
	fs.StringVar(&o.etcdKey, "etcd-key", "", "the private key of -etcd-cert, in PEM `FILE`")
	hostname, _ := os.Hostname()
	fs.StringVar(&o.nodeID, "node-id", hostname, "this node's `ID` in etcd, unique in the fleet (default: the host name)")
	fs.DurationVar(&o.fleetLeaseTTL, "fleet-lease-ttl", 10*time.Second, "the etcd lease's time to live: whole seconds, at least 2s; a dead node's slices return after it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.parseFleetFlags(*etcd, fs); err != nil {
		return o, err
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return o, fmt.Errorf("-log-format %q: want text or json", o.logFormat)
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.retryAfter, err = parseRetryAfter(*retry); err != nil {
		return o, fmt.Errorf("-retry-after: %w", err)
	}
	if o.maxResponseBytes <= 0 {
		return o, errors.New("-max-response-bytes: must be positive")
	}
	if o.maxConnections <= 0 || o.maxConnectionsPerClient <= 0 {
		return o, errors.New("-max-connections and -max-connections-per-client: must be positive")
	}
	if o.recordMaxBytes < 0 {
		return o, errors.New("-record-max-bytes: must not be negative")
	}
	if o.recordMaxBytes > 0 && o.recordMaxBytes < latentd.MinRecordMaxBytes {
		return o, fmt.Errorf("-record-max-bytes: must be 0 (no rotation) or at least %d (1 MiB), so that a shutdown's rotations fit the stop timeout", latentd.MinRecordMaxBytes)
	}
	if o.store != "" && o.artifacts == "" {
		// The store keeps deployments across restarts; a temporary
		// artifact directory would not keep what they name.
		return o, errors.New("-store needs -artifacts: the stored deployments name artifacts that must outlive the process")
	}
	if err := checkDemonstrationTokens(o); err != nil {
		return o, err
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return o, errors.New("-tls-cert and -tls-key go together")
	}
	if o.tlsCert == "" && !o.insecurePlaintext && !loopbackAddress(o.listen) {
		return o, fmt.Errorf("-listen %s is not a loopback address: give -tls-cert and -tls-key, or -insecure-plaintext to send bearer tokens in clear", o.listen)
	}
	return o, nil
}

// checkDemonstrationTokens refuses the published demonstration tokens
// (the administrator's among them) anywhere but the pure demonstration:
// no -policy, -store or -artifacts, on a loopback address.
func checkDemonstrationTokens(o options) error {
	if o.tokens != "" {
		return nil
	}
	var given []string
	for _, f := range []struct{ name, value string }{{"-policy", o.policy}, {"-store", o.store}, {"-artifacts", o.artifacts}} {
		if f.value != "" {
			given = append(given, f.name)
		}
	}
	if !loopbackAddress(o.listen) {
		given = append(given, "-listen "+o.listen)
	}
	if len(given) == 0 {
		return nil
	}
	return fmt.Errorf("%s without -tokens: the demonstration tokens serve only the pure demonstration "+
		"(no -policy, -store or -artifacts, and a loopback -listen address); give -tokens FILE", strings.Join(given, ", "))
}

// loopbackAddress reports whether a listen address is on this machine's
// loopback only: localhost, or an address in 127.0.0.0/8 or ::1.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseRetryAfter reads "reason=seconds,..." with reasons from core's
// vocabulary.
func parseRetryAfter(s string) (map[core.Reason]uint32, error) {
	out := map[core.Reason]uint32{}
	if s == "" {
		return out, nil
	}
	known := map[core.Reason]bool{}
	for _, r := range core.Reasons() {
		known[r] = true
	}
	for _, item := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want REASON=SECONDS", item)
		}
		if !known[core.Reason(name)] {
			return nil, fmt.Errorf("%q: not a reason of the decision table", name)
		}
		secs, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: seconds must be a whole number", item)
		}
		out[core.Reason(name)] = uint32(secs)
	}
	return out, nil
}

// started is a running node and what to undo when it ends.
type started struct {
	node     *latentd.Node
	listener net.Listener
	demo     bool // the demonstration tokens are in use
	cleanup  func()
	cert     *certificate // nil without TLS
}

// start builds the node the options describe and listens; it does not
// serve yet.
func start(ctx context.Context, o options, logger *slog.Logger) (*started, error) {
	s := &started{cleanup: func() {}}
	ok := false
	defer func() {
		if !ok {
			s.cleanup()
		}
	}()
	pol, policySHA256, err := loadPolicy(o.policy)
	if err != nil {
		return nil, err
	}
	tokens, err := loadTokens(o.tokens)
	if err != nil {
		return nil, err
	}
	s.demo = o.tokens == ""
	cfg := latentd.Config{Policy: pol, Tokens: tokens, StoreDir: o.store, RetryAfter: o.retryAfter, ShutdownGrace: o.grace,
		AllowedHosts: o.allowedHosts, Logger: logger,
		RecordPath: o.record, RecordMaxBytes: o.recordMaxBytes, RecordPolicySHA256: policySHA256,
		MaxConnections: o.maxConnections, MaxConnectionsPerClient: o.maxConnectionsPerClient}
	if cfg.Fleet, err = fleetConfig(o); err != nil {
		return nil, err
	}
	if cfg.Fleet != nil {
		client := cfg.Fleet.Client
		prev := s.cleanup
		s.cleanup = func() { _ = client.Close(); prev() }
	}
	if o.accessLog {
		cfg.AccessLog = logger.With("log", "access")
	}
	if o.tlsCert != "" {
		if s.cert, err = loadCertificate(o.tlsCert, o.tlsKey); err != nil {
			return nil, err
		}
		cfg.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: s.cert.get}
	}
	artifacts := o.artifacts
	if artifacts == "" {
		dir, err := os.MkdirTemp("", "latentd-artifacts-")
		if err != nil {
			return nil, err
		}
		artifacts = dir
		s.cleanup = func() { _ = os.RemoveAll(dir) }
	}
	guests, err := latentd.NewWasmGuests(ctx, latentd.WasmConfig{ArtifactsDir: artifacts, MaxResponseBytes: o.maxResponseBytes,
		FuelPerMillisecond: o.fuelPerMillisecond, MaxMemoryBytes: pol.Node.BudgetCeiling.MemoryBytes})
	if err != nil {
		return nil, err
	}
	cfg.Guests = guests
	if o.store == "" {
		// The demonstration catalog, and the guest it names.
		if cfg.Deployments, err = demoDeployments(); err != nil {
			return nil, err
		}
		if err := putDemoGuest(guests); err != nil {
			return nil, err
		}
	}
	node, err := latentd.New(cfg)
	if err != nil {
		_ = guests.Close(ctx)
		return nil, err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = node.Shutdown(ctx)
		return nil, fmt.Errorf("-listen %s: %w", o.listen, err)
	}
	s.node, s.listener = node, l
	ok = true
	return s, nil
}

// loadPolicy reads and decodes the policy file (the embedded one when
// path is empty; a path that is not a regular file, a FIFO say, is
// refused rather than waited on); it also returns the SHA-256 (hex) of
// the file's bytes, for a trace's header.
func loadPolicy(path string) (*policy.NodeAdmissionPolicy, string, error) {
	var data []byte
	var err error
	if path == "" {
		data = demo.PolicyJSON()
	} else {
		data, err = boundedfile.ReadRegular(path, strictjson.MaxDocumentBytes)
	}
	if err != nil {
		return nil, "", err
	}
	p, err := policy.DecodePolicy(data)
	if err != nil {
		if path == "" {
			path = "the embedded policy"
		}
		return nil, "", fmt.Errorf("%s:\n%w", path, err)
	}
	sum := sha256.Sum256(data)
	return p, hex.EncodeToString(sum[:]), nil
}

func loadTokens(path string) (*latentd.Tokens, error) {
	if path != "" {
		return latentd.LoadTokens(path)
	}
	return latentd.DecodeTokens(demo.TokensJSON())
}

func demoDeployments() ([]catalog.Deployment, error) { return demo.Deployments() }

func putDemoGuest(g *latentd.WasmGuests) error {
	return g.PutArtifact(demo.GuestDigest(), bytes.NewReader(demo.Guest()))
}

// serveMain runs the node until ctx ends (SIGTERM, SIGINT), then shuts it
// down gracefully, reloading at each SIGHUP from its first instruction.
func serveMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return serveWithReloads(ctx, args, hup, stdout, stderr)
}

// serveWithReloads is serveMain with the channel that SIGHUP arrives on,
// caught by the caller before anything else: a SIGHUP that comes during
// the start waits in it, and its reload is done once the node serves.
func serveWithReloads(ctx context.Context, args []string, hup <-chan os.Signal, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "latentd:", err)
		return 2
	}
	logger := newLogger(o.logFormat, stderr)
	s, err := start(ctx, o, logger)
	if err != nil {
		// edge/latentd's errors name their package already.
		fmt.Fprintln(stderr, nodeErrorLines(err))
		return 1
	}
	defer s.cleanup()
	// Reloads start before the address is printed: whoever reads the
	// address may signal at once. One asked for during the start is
	// done now.
	stopReloads := onReload(s, o, logger, hup)
	defer stopReloads()
	addr := s.listener.Addr().String()
	scheme := "http"
	if s.cert != nil {
		scheme = "https"
	}
	fmt.Fprintf(stdout, "latentd: serving on %s://%s\n", scheme, addr)
	if s.demo {
		fmt.Fprintf(stdout, "try:\n  curl -sS -X POST -H 'Authorization: Bearer %s' --data-binary 'world' %s://%s/v1/invoke/acme/hello/greet\n",
			DemoUserToken, scheme, addr)
	}
	served := make(chan error, 1)
	go func() { served <- s.node.Serve(s.listener) }()
	select {
	case err := <-served:
		fmt.Fprintln(stderr, "latentd: serve:", err)
		_ = s.node.Shutdown(context.Background())
		return 1
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "latentd: shutting down")
	if err := s.node.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(stderr, nodeErrorLines(err))
		return 1
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "latentd: serve:", err)
		return 1
	}
	fmt.Fprintln(stdout, "latentd: stopped; every permit released, store closed")
	return 0
}

// nodeErrorLines is an edge/latentd error as latentd prints it: each of
// its lines (errors.Join joins a shutdown's) begins "latentd: " once,
// though the package names itself already.
func nodeErrorLines(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = "latentd: " + strings.TrimPrefix(l, "latentd: ")
	}
	return strings.Join(lines, "\n")
}
