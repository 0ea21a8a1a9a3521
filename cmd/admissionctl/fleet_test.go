package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"latent.dev/admission/edge/fleet/etcdproc"
)

// startEtcd starts a real etcd for the test; without the binary the test
// skips, unless CI is set, when it fails (.ci/run installs etcd-server).
func startEtcd(t *testing.T) *etcdproc.Proc {
	t.Helper()
	p, err := etcdproc.Start(t.TempDir(), 2*time.Minute)
	if errors.Is(err, etcdproc.ErrMissing) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v, and CI is set", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

func fleetRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runFleet(args, func(string) string { return "" }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestFleetSetGetList(t *testing.T) {
	e := startEtcd(t)
	etcd := []string{"-etcd", e.Endpoint}
	if code, out, errOut := fleetRun(t, append([]string{"set"}, append(etcd, "acme", "12")...)...); code != ExitOK || out != "acme: fleet limit 12\n" {
		t.Fatalf("set: %d %q %q", code, out, errOut)
	}
	if code, _, errOut := fleetRun(t, append([]string{"set"}, append(etcd, "globex", "3")...)...); code != ExitOK {
		t.Fatalf("set globex: %d %q", code, errOut)
	}
	// A node's slice, as its broker writes it.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Put(ctx, "/latent/fleet/slices/acme/n1", `{"has":5,"wants":7}`); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "/latent/fleet/slices/acme/n2", `{"has":4,"wants":4}`); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := fleetRun(t, append([]string{"get"}, append(etcd, "acme")...)...)
	if code != ExitOK || !strings.Contains(out, "tenant acme: fleet limit 12, held 9 by 2 nodes") ||
		!strings.Contains(out, "node n1  has 5  wants 7") || !strings.Contains(out, "node n2  has 4  wants 4") {
		t.Fatalf("get: %d %q %q", code, out, errOut)
	}
	code, out, errOut = fleetRun(t, append([]string{"list"}, etcd...)...)
	if code != ExitOK || !strings.Contains(out, "acme    12     9     2") || !strings.Contains(out, "globex  3      0     0") {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	if code, out, _ := fleetRun(t, append([]string{"get"}, append(etcd, "nobody")...)...); code != ExitOK || !strings.Contains(out, "fleet limit unset") {
		t.Fatalf("get of an unset tenant: %d %q", code, out)
	}
	// A value that does not decode is named, and fails the command.
	if _, err := c.Put(ctx, "/latent/fleet/limits/acme", "12 "); err != nil {
		t.Fatal(err)
	}
	code, out, _ = fleetRun(t, append([]string{"get"}, append(etcd, "acme")...)...)
	if code != ExitRefused || !strings.Contains(out, `key \"/latent/fleet/limits/acme\"`) && !strings.Contains(out, `/latent/fleet/limits/acme`) {
		t.Fatalf("get of a bad limit: %d %q", code, out)
	}
}

func TestFleetMisuse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, ExitMisuse, "usage: admissionctl fleet"},
		{[]string{"drop"}, ExitMisuse, `unknown verb "drop"`},
		{[]string{"set", "acme"}, ExitMisuse, "usage"},
		{[]string{"set", "acme", "-1"}, ExitMisuse, `LIMIT "-1": want a whole number`},
		{[]string{"set", "acme", "1000000001"}, ExitMisuse, "want a whole number from 0 to 1000000000"},
		{[]string{"set", "-etcd", "127.0.0.1:2379", "acme", "1"}, ExitMisuse, "each endpoint must be http://HOST:PORT"},
		{[]string{"set", "-etcd", "http://127.0.0.1:1", "a/b", "1"}, ExitMisuse, `tenant "a/b"`},
		{[]string{"list", "-etcd-cert", "c.pem"}, ExitMisuse, "-etcd-cert and -etcd-key go together"},
		{[]string{"list", "-etcd", "https://127.0.0.1:1", "-etcd-ca", "/nonexistent/ca.pem"}, ExitInput, "/nonexistent/ca.pem"},
		{[]string{"list", "-prefix", "/x"}, ExitMisuse, "must end in '/'"},
		{[]string{"list", "-etcd", "http://127.0.0.1:1", "-timeout", "300ms"}, ExitInput, "etcd http://127.0.0.1:1"},
	} {
		code, _, errOut := fleetRun(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
