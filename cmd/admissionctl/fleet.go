package main

// `admissionctl fleet` sets and reads the fleet-wide limits of tenants in
// etcd (docs/fleet.md), the one source of truth that every node's broker
// reads:
//
//	admissionctl fleet set [flags] TENANT LIMIT
//	admissionctl fleet get [flags] TENANT
//	admissionctl fleet list [flags]
//
// Flags: -etcd ENDPOINTS (comma-separated; default $LATENT_ETCD, else
// http://127.0.0.1:2379), -etcd-ca, -etcd-cert, -etcd-key (TLS, as
// latentd's flags of those names), -prefix (default /latent/fleet/),
// -timeout. Exit status: 0 ok; 1 a value in etcd does not decode (get,
// list); 2 misuse; 3 etcd could not be reached or refused the request.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"latent.dev/admission/edge/fleet"
	"latent.dev/admission/internal/printable"
)

// DefaultEtcd is the etcd a fleet verb talks to without -etcd or
// $LATENT_ETCD: etcd's own default client URL.
const DefaultEtcd = "http://127.0.0.1:2379"

func init() {
	commands["fleet"] = func(args []string, stdout, stderr io.Writer) int {
		return runFleet(args, os.Getenv, stdout, stderr)
	}
}

const fleetUsage = `usage: admissionctl fleet VERB [flags] ARGS
verbs:
  set TENANT LIMIT   set the tenant's fleet limit on live activations (0 to 1000000000)
  get TENANT         the tenant's fleet limit and every node's slice
  list               every tenant's fleet limit and the slices' sum
flags of every verb: -etcd ENDPOINTS ($LATENT_ETCD, else ` + DefaultEtcd + `), -etcd-ca FILE,
  -etcd-cert FILE -etcd-key FILE, -prefix (default /latent/fleet/), -timeout
exit status: 0 ok, 1 a value in etcd does not decode, 2 misuse, 3 etcd unreachable or refused
`

func runFleet(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, fleetUsage)
		return ExitMisuse
	}
	verbArgs := map[string]int{"set": 2, "get": 1, "list": 0}
	want, ok := verbArgs[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "admissionctl fleet: unknown verb %q\n%s", printable.String(args[0]), fleetUsage)
		return ExitMisuse
	}
	fs := flag.NewFlagSet("admissionctl fleet "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoints := fs.String("etcd", "", "etcd client `ENDPOINTS`, comma-separated (default $LATENT_ETCD, else "+DefaultEtcd+")")
	var o fleet.ClientOptions
	fs.StringVar(&o.CAFile, "etcd-ca", "", "PEM `FILE` of the CAs that sign etcd's server certificate")
	fs.StringVar(&o.CertFile, "etcd-cert", "", "client certificate PEM `FILE` (with -etcd-key)")
	fs.StringVar(&o.KeyFile, "etcd-key", "", "the private key of -etcd-cert, PEM `FILE`")
	prefix := fs.String("prefix", "/latent/fleet/", "the root of the fleet's keys")
	timeout := fs.Duration("timeout", 10*time.Second, "how long the request to etcd may take")
	if err := fs.Parse(args[1:]); err != nil {
		return ExitMisuse
	}
	if fs.NArg() != want {
		fmt.Fprint(stderr, fleetUsage)
		return ExitMisuse
	}
	if *endpoints == "" {
		*endpoints = getenv("LATENT_ETCD")
	}
	if *endpoints == "" {
		*endpoints = DefaultEtcd
	}
	for _, e := range strings.Split(*endpoints, ",") {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			fmt.Fprintf(stderr, "admissionctl fleet: -etcd %q: each endpoint must be http://HOST:PORT or https://HOST:PORT\n", printable.String(e))
			return ExitMisuse
		}
		o.Endpoints = append(o.Endpoints, e)
	}
	if !strings.HasSuffix(*prefix, "/") {
		fmt.Fprintf(stderr, "admissionctl fleet: -prefix %q must end in '/'\n", printable.String(*prefix))
		return ExitMisuse
	}
	var limit int64
	if args[0] == "set" {
		n, err := strconv.ParseInt(fs.Arg(1), 10, 64)
		if err != nil || n < 0 || n > 1_000_000_000 {
			fmt.Fprintf(stderr, "admissionctl fleet set: LIMIT %q: want a whole number from 0 to 1000000000\n", printable.String(fs.Arg(1)))
			return ExitMisuse
		}
		limit = n
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		fmt.Fprintln(stderr, "admissionctl fleet: -etcd-cert and -etcd-key go together")
		return ExitMisuse
	}
	o.KeepAliveTime = *timeout
	client, err := fleet.NewClient(o) // a TLS file that cannot be read or parsed
	if err != nil {
		fmt.Fprintf(stderr, "admissionctl fleet: %v\n", err)
		return ExitInput
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	switch args[0] {
	case "set":
		if err := fleet.SetLimit(ctx, client, *prefix, fs.Arg(0), limit); err != nil {
			return fleetFailed(stderr, err, *endpoints)
		}
		fmt.Fprintf(stdout, "%s: fleet limit %d\n", fs.Arg(0), limit)
		return ExitOK
	case "get":
		t, err := fleet.GetLimit(ctx, client, *prefix, fs.Arg(0))
		if err != nil {
			return fleetFailed(stderr, err, *endpoints)
		}
		return printTenantLimit(stdout, t)
	default:
		all, err := fleet.ListLimits(ctx, client, *prefix, "")
		if err != nil {
			return fleetFailed(stderr, err, *endpoints)
		}
		return printLimits(stdout, all)
	}
}

func fleetFailed(stderr io.Writer, err error, endpoints string) int {
	fmt.Fprintf(stderr, "admissionctl fleet: etcd %s: %v\n", endpoints, err)
	if errors.Is(err, fleet.ErrConfig) {
		return ExitMisuse
	}
	return ExitInput
}

func limitText(n int64) string {
	if n < 0 {
		return "unset"
	}
	return strconv.FormatInt(n, 10)
}

// printTenantLimit prints one tenant: its limit, the sum of its slices and
// each node's slice (what it holds and wants).
func printTenantLimit(w io.Writer, t fleet.TenantLimit) int {
	code := ExitOK
	var sum int64
	for _, s := range t.Slices {
		sum += s.Has
	}
	fmt.Fprintf(w, "tenant %s: fleet limit %s, held %d by %d nodes\n", printable.String(t.Tenant), limitText(t.Limit), sum, len(t.Slices))
	if t.Problem != "" {
		fmt.Fprintf(w, "  problem: %s\n", printable.String(t.Problem))
		code = ExitRefused
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, s := range t.Slices {
		if s.Problem != "" {
			fmt.Fprintf(tw, "  node %s\tproblem: %s\n", printable.String(s.Node), printable.String(s.Problem))
			code = ExitRefused
			continue
		}
		fmt.Fprintf(tw, "  node %s\thas %d\twants %d\n", printable.String(s.Node), s.Has, s.Wants)
	}
	_ = tw.Flush()
	return code
}

// printLimits prints one line per tenant: its limit, what its slices hold
// and how many nodes hold them.
func printLimits(w io.Writer, all []fleet.TenantLimit) int {
	code := ExitOK
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tLIMIT\tHELD\tNODES")
	for _, t := range all {
		var sum int64
		for _, s := range t.Slices {
			sum += s.Has
			if s.Problem != "" {
				code = ExitRefused
			}
		}
		limit := limitText(t.Limit)
		if t.Problem != "" {
			limit, code = "bad value", ExitRefused
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", printable.String(t.Tenant), limit, sum, len(t.Slices))
	}
	_ = tw.Flush()
	return code
}
