package main

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"time"

	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/edge/latentd"
)

// parseFleetFlags checks the fleet broker's flags: -etcd's endpoints, and
// the TLS files, -node-id and -fleet-lease-ttl, which only go with -etcd.
func (o *options) parseFleetFlags(endpoints string, fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if endpoints == "" {
		for _, name := range []string{"etcd-ca", "etcd-cert", "etcd-key", "node-id", "fleet-lease-ttl"} {
			if set[name] {
				return fmt.Errorf("-%s needs -etcd: it configures the fleet broker's connection to etcd", name)
			}
		}
		if set["etcd"] {
			return errors.New("-etcd: give at least one endpoint (http://HOST:PORT or https://HOST:PORT, comma-separated)")
		}
		return nil
	}
	for _, e := range strings.Split(endpoints, ",") {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("-etcd %q: each endpoint must be http://HOST:PORT or https://HOST:PORT (comma-separated, no spaces)", e)
		}
		if u.Scheme == "http" && (o.etcdCA != "" || o.etcdCert != "") {
			return fmt.Errorf("-etcd %q: -etcd-ca and -etcd-cert speak TLS; the endpoint must be https://", e)
		}
		o.etcd = append(o.etcd, e)
	}
	if (o.etcdCert == "") != (o.etcdKey == "") {
		return errors.New("-etcd-cert and -etcd-key go together")
	}
	if o.nodeID == "" || len(o.nodeID) > 128 || strings.ContainsFunc(o.nodeID, func(r rune) bool { return r == '/' || r < 0x21 || r == 0x7f }) {
		return fmt.Errorf("-node-id %q: must be 1 to 128 printable characters without '/' or spaces (it names this node's keys in etcd)", o.nodeID)
	}
	if o.fleetLeaseTTL < 2*time.Second || o.fleetLeaseTTL%time.Second != 0 {
		return fmt.Errorf("-fleet-lease-ttl %v: must be whole seconds, at least 2s (etcd's smallest lease)", o.fleetLeaseTTL)
	}
	return nil
}

// fleetConfig is the node's fleet configuration: nil without -etcd. The
// client does not wait for a connection; the caller closes it after the
// node's shutdown.
func fleetConfig(o options) (*latentd.FleetConfig, error) {
	if len(o.etcd) == 0 {
		return nil, nil
	}
	client, err := fleet.NewClient(fleet.ClientOptions{Endpoints: o.etcd, CAFile: o.etcdCA, CertFile: o.etcdCert, KeyFile: o.etcdKey})
	if err != nil {
		return nil, fmt.Errorf("-etcd %s: %w", strings.Join(o.etcd, ","), err)
	}
	return &latentd.FleetConfig{Client: client, NodeID: o.nodeID, TTL: o.fleetLeaseTTL}, nil
}
