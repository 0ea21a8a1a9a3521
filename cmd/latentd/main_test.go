package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/latentd/demo"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		// The test binary as latentd itself (see startChild).
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

// syncWriter passes lines on as they are written.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		select {
		case w.lines <- sc.Text():
		default:
		}
	}
	return len(p), nil
}

func TestTheDemonstrationServesThePrintedCurlLine(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lineWriter{make(chan string, 64)}
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- serveMain(ctx, []string{"-listen", "127.0.0.1:0", "-log-format", "json"}, out, &stderr)
	}()
	var curl string
	deadline := time.After(2 * time.Minute) // only a hang: a loaded machine is slow
	for curl == "" {
		select {
		case line := <-out.lines:
			if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
				curl = strings.TrimSpace(line)
			}
		case c := <-code:
			t.Fatalf("exited %d: %s", c, stderr.String())
		case <-deadline:
			t.Fatal("no curl line")
		}
	}
	// curl -sS -X POST -H 'Authorization: Bearer TOKEN' --data-binary 'world' URL
	fields := strings.Fields(curl)
	url := fields[len(fields)-1]
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(curl, "Bearer "+DemoUserToken) {
		t.Fatalf("curl line %q", curl)
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	// The demonstration reads this machine's real pressure: on a loaded
	// machine it may refuse as overloaded, or find its sampler's last
	// sample too old, for a while (retryable 503s), which is its promise,
	// not a fault; the call is repeated until it runs.
	var resp *http.Response
	var body []byte
	for start := time.Now(); ; time.Sleep(200 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("world"))
		req.Header.Set("Authorization", "Bearer "+DemoUserToken)
		var err error
		if resp, err = client.Do(req); err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"retryable":true`) || time.Since(start) > 2*time.Minute {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || string(body) != "hello, world" || resp.Header.Get("Latent-Outcome") != "success" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	client.CloseIdleConnections()
	cancel() // as SIGTERM does
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no exit after the signal")
	}
	// -log-format json: the access log's line for that call is JSON.
	var found bool
	for _, line := range strings.Split(stderr.String(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["log"] == "access" && entry["outcome"] == "success" &&
			entry["tenant"] == "acme" && entry["route"] == "greet" {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON access-log line for the call in:\n%s", stderr.String())
	}
}

func TestTheDemonstrationCatalogNamesTheEmbeddedGuest(t *testing.T) {
	module := demo.Guest()
	sum := sha256.Sum256(module)
	deps, err := demoDeployments()
	if err != nil {
		t.Fatal(err)
	}
	want := "sha256:" + hex.EncodeToString(sum[:])
	for _, d := range deps {
		for _, r := range d.Routes {
			for _, rev := range r.Revisions {
				if rev.Release.ArtifactDigest != want {
					t.Errorf("%s/%s %s names %s, the embedded guest is %s", d.Tenant, d.Service, r.Name, rev.Release.ArtifactDigest, want)
				}
			}
		}
	}
	pol, _, err := loadPolicy("")
	if err != nil {
		t.Fatal(err)
	}
	data := demo.CatalogJSON()
	if _, err := catalog.ValidateFile(data, pol); err != nil {
		t.Errorf("the demonstration catalog does not fit the demonstration policy: %v", err)
	}
	var tokens struct{ Tokens []map[string]any }
	data = demo.TokensJSON()
	if err := json.Unmarshal(data, &tokens); err != nil {
		t.Fatal(err)
	}
	if tok, err := loadTokens(""); err != nil {
		t.Fatal(err)
	} else if p, ok := tok.Authenticate(DemoUserToken); !ok || p.Tenant != "acme" {
		t.Errorf("the documented demonstration token: %+v %v", p, ok)
	} else if p, ok := tok.Authenticate(DemoAdminToken); !ok || !p.Admin {
		t.Errorf("the documented administrator token: %+v %v", p, ok)
	}
}

func TestFlagsAndFiles(t *testing.T) {
	tokens := tokenFile(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-retry-after", "capacity-exhausted"}, 2, "want REASON=SECONDS"},
		{[]string{"-retry-after", "bogus=1"}, 2, "not a reason"},
		{[]string{"-retry-after", "capacity-exhausted=-1"}, 2, "whole number"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"-log-format", "xml"}, 2, "-log-format \"xml\": want text or json"},
		{[]string{"-max-response-bytes", "0"}, 2, "must be positive"},
		{[]string{"-record-max-bytes", "-1"}, 2, "-record-max-bytes: must not be negative"},
		{[]string{"-record-max-bytes", "1"}, 2, "-record-max-bytes: must be 0 (no rotation) or at least 1048576 (1 MiB)"},
		{[]string{"-record-max-bytes", "1048575"}, 2, "-record-max-bytes: must be 0 (no rotation) or at least 1048576 (1 MiB)"},
		{[]string{"-max-connections", "0"}, 2, "-max-connections and -max-connections-per-client: must be positive"},
		{[]string{"-max-connections-per-client", "-1"}, 2, "-max-connections and -max-connections-per-client: must be positive"},
		{[]string{"-record", filepath.Join(t.TempDir(), "missing", "trace.jsonl"), "-tokens", tokens}, 1, "trace.jsonl"},
		{[]string{"-policy", filepath.Join(t.TempDir(), "missing.json"), "-tokens", tokens}, 1, "missing.json"},
		{[]string{"-tokens", writeFile(t, "tokens.json", `{"tokens":[{"sha256":"x"}]}`)}, 1, "tokens.json: $.tokens[0].sha256"},
		{[]string{"-policy", writeFile(t, "policy.json", `{"node":{}}`), "-tokens", tokens}, 1, "policy.json"},
		{[]string{"-listen", "127.0.0.1:notaport"}, 1, "-listen"},
		{[]string{"-allowed-host", "", "-tokens", tokens}, 2, "-allowed-host"},
		{[]string{"-allowed-host", "a/b", "-tokens", tokens}, 2, "-allowed-host"},
		{[]string{"-allowed-host", "node.example:8080", "-tokens", tokens}, 2, "without a port"},
		{[]string{"-etcd-ca", "ca.pem"}, 2, "-etcd-ca needs -etcd"},
		{[]string{"-node-id", "n1"}, 2, "-node-id needs -etcd"},
		{[]string{"-fleet-lease-ttl", "5s"}, 2, "-fleet-lease-ttl needs -etcd"},
		{[]string{"-etcd", ""}, 2, "-etcd: give at least one endpoint"},
		{[]string{"-etcd", "127.0.0.1:2379"}, 2, `-etcd "127.0.0.1:2379": each endpoint must be http://HOST:PORT`},
		{[]string{"-etcd", "http://127.0.0.1:2379,"}, 2, `-etcd "": each endpoint`},
		{[]string{"-etcd", "http://127.0.0.1:2379", "-etcd-ca", "ca.pem"}, 2, "the endpoint must be https://"},
		{[]string{"-etcd", "https://127.0.0.1:2379", "-etcd-cert", "c.pem"}, 2, "-etcd-cert and -etcd-key go together"},
		{[]string{"-etcd", "http://127.0.0.1:2379", "-node-id", "a/b"}, 2, `-node-id "a/b"`},
		{[]string{"-etcd", "http://127.0.0.1:2379", "-fleet-lease-ttl", "1500ms"}, 2, "-fleet-lease-ttl 1.5s: must be whole seconds, at least 2s"},
		{[]string{"-etcd", "https://127.0.0.1:2379", "-etcd-ca", filepath.Join(t.TempDir(), "missing-ca.pem")}, 1, "missing-ca.pem"},
	} {
		var stderr bytes.Buffer
		code := serveMain(context.Background(), tc.args, io.Discard, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnEmptyStoreStartsAnEmptyCatalogAndASecondNodeIsRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	ctx := context.Background()
	o := options{listen: "127.0.0.1:0", store: store, artifacts: t.TempDir(), tokens: tokenFile(t), grace: time.Second, maxResponseBytes: 1 << 20}
	s, err := start(ctx, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.cleanup()
	_, err = start(ctx, o, nil)
	if err == nil || !errors.Is(err, catalog.ErrStoreInUse) {
		t.Errorf("a second node on %s: %v", store, err)
	}
	if err := s.node.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s.listener.Close()
}
