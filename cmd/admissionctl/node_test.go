package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// stub is a node that records what it was sent and answers what the test
// sets. (The tests against a real latentd, with TLS on and off, are in
// cmd/latentd.)
type stub struct {
	mu       sync.Mutex
	requests []string // "METHOD PATH AUTH"
	bodies   map[string][]byte
	status   int
	answer   string
}

func (s *stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	s.bodies[r.URL.Path] = body
	status, answer := s.status, s.answer
	s.mu.Unlock()
	if status == 0 {
		status, answer = 200, `{"generation": 7}`
		if hexDigest, ok := strings.CutPrefix(r.URL.Path, "/v1/admin/artifacts/sha256/"); ok {
			answer = `{"digest": "sha256:` + hexDigest + `"}`
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, answer)
}

func newStub(t *testing.T, tlsOn bool) (*stub, *httptest.Server) {
	s := &stub{bodies: map[string][]byte{}}
	var srv *httptest.Server
	if tlsOn {
		srv = httptest.NewTLSServer(s)
	} else {
		srv = httptest.NewServer(s)
	}
	t.Cleanup(srv.Close)
	return s, srv
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func runMain(t *testing.T, getenv func(string) string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runNode(args, getenv, &out, &errOut)
	return code, out.String(), errOut.String()
}

// deployment is the first deployment of the committed example catalog,
// with its artifact digest set to digest.
func deployment(t *testing.T, digest string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/catalog/good.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Deployments []map[string]any }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	d := f.Deployments[0]
	for _, rt := range d["routes"].([]any) {
		for _, rev := range rt.(map[string]any)["revisions"].([]any) {
			rev.(map[string]any)["release"].(map[string]any)["artifact_digest"] = digest
		}
	}
	out, _ := json.Marshal(d)
	return out
}

func TestDeployPushesTheNamedArtifactsThenDeploys(t *testing.T) {
	s, srv := newStub(t, false)
	dir := t.TempDir()
	artifact := []byte("\x00asm\x01\x00\x00\x00")
	sum := sha256.Sum256(artifact)
	hexDigest := hex.EncodeToString(sum[:])
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sha256", hexDigest+".wasm"), artifact, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "deployment.json")
	if err := os.WriteFile(file, deployment(t, "sha256:"+hexDigest), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, env(map[string]string{"LATENT_TOKEN": "tok-1"}), "deploy", "-node", srv.URL, "-artifacts", dir, file)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{"PUT /v1/admin/artifacts/sha256/" + hexDigest + " Bearer tok-1", "PUT /v1/admin/deployments/acme/thumbs Bearer tok-1"}
	if strings.Join(s.requests, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests %q, want %q", s.requests, want)
	}
	if !bytes.Equal(s.bodies["/v1/admin/artifacts/sha256/"+hexDigest], artifact) {
		t.Error("the artifact's bytes were not uploaded")
	}
	if !strings.Contains(out, "pushed sha256:"+hexDigest) || !strings.Contains(out, "deployed acme/thumbs: generation 7") {
		t.Errorf("output %q", out)
	}

	// An artifact file whose bytes are not its name's digest is refused
	// before anything is deployed.
	if err := os.WriteFile(filepath.Join(dir, "sha256", hexDigest+".wasm"), []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.requests = nil
	code, _, errOut = runMain(t, env(map[string]string{"LATENT_TOKEN": "tok-1"}), "deploy", "-node", srv.URL, "-artifacts", dir, file)
	if code != ExitInput || !strings.Contains(errOut, "not the sha256:"+hexDigest) {
		t.Errorf("a mislabelled artifact: exit %d, %q", code, errOut)
	}
	for _, r := range s.requests {
		if strings.Contains(r, "/deployments/") {
			t.Errorf("deployed after a mislabelled artifact: %q", s.requests)
		}
	}
}

func TestRefusalsArePrintedWithTheirPaths(t *testing.T) {
	s, srv := newStub(t, false)
	s.status = 400
	s.answer = `{"error": "invalid deployment", "problems": [{"path": "$.routes[0].revisions[0].policy.features", "message": "too many\u001b"}, "$.tenant: a line"]}`
	file := filepath.Join(t.TempDir(), "d.json")
	if err := os.WriteFile(file, deployment(t, "sha256:"+strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runMain(t, env(map[string]string{"LATENT_TOKEN": "t"}), "deploy", "-node", srv.URL, file)
	if code != ExitRefused {
		t.Fatalf("exit %d, want %d: %s", code, ExitRefused, errOut)
	}
	for _, want := range []string{"the node answered 400: invalid deployment", "$.routes[0].revisions[0].policy.features: too many\\u001b\n", "$.tenant: a line\n"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}

	s.status, s.answer = 403, `{"error": "an administrator token is required"}`
	code, _, errOut = runMain(t, env(map[string]string{"LATENT_TOKEN": "t"}), "snapshot", "-node", srv.URL)
	if code != ExitRefused || !strings.Contains(errOut, "403: an administrator token is required") {
		t.Errorf("403: exit %d, %q", code, errOut)
	}
}

func TestMisuseAndUnreadableInput(t *testing.T) {
	_, srv := newStub(t, false)
	withToken := env(map[string]string{"LATENT_TOKEN": "t", "LATENT_NODE": srv.URL})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"tenant": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		args   []string
		code   int
		stderr string
	}{
		{"no verb", withToken, nil, ExitMisuse, "usage"},
		{"unknown verb", withToken, []string{"launch"}, ExitMisuse, `unknown verb "launch"`},
		{"a token is never a flag", withToken, []string{"snapshot", "-token", "t"}, ExitMisuse, "-token"},
		{"no token", env(nil), []string{"snapshot"}, ExitMisuse, "LATENT_TOKEN"},
		{"missing argument", withToken, []string{"usage"}, ExitMisuse, "usage: admissionctl node usage"},
		{"not TENANT/SERVICE", withToken, []string{"undeploy", "acme"}, ExitMisuse, "TENANT/SERVICE"},
		{"bad node URL", withToken, []string{"snapshot", "-node", "ftp://x"}, ExitMisuse, "-node"},
		{"unreadable token file", withToken, []string{"snapshot", "-token-file", filepath.Join(dir, "none")}, ExitInput, "-token-file"},
		{"unreadable CA", withToken, []string{"snapshot", "-ca", filepath.Join(dir, "none")}, ExitInput, "-ca"},
		{"a CA file with no certificate", withToken, []string{"snapshot", "-ca", bad}, ExitInput, "no PEM certificate"},
		{"unreadable deployment", withToken, []string{"deploy", filepath.Join(dir, "none")}, ExitInput, "none"},
		{"a deployment with problems", withToken, []string{"deploy", bad}, ExitRefused, "tenant: expected a string"},
		{"unreachable node", env(map[string]string{"LATENT_TOKEN": "t"}), []string{"snapshot", "-node", "http://127.0.0.1:1"}, ExitInput, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runMain(t, tc.getenv, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errOut, tc.stderr)
			}
		})
	}
}

func TestTokenFileAndPrivateCA(t *testing.T) {
	s, srv := newStub(t, true)
	s.answer = `{"tenant":"acme","live_activations":0}`
	s.status = 200
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Without the CA the server's certificate is not trusted.
	code, _, errOut := runMain(t, env(nil), "usage", "-node", srv.URL, "-token-file", tokenFile, "acme")
	if code != ExitInput || !strings.Contains(errOut, "certificate") {
		t.Fatalf("an untrusted certificate: exit %d, %q", code, errOut)
	}
	ca := filepath.Join(dir, "ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemData, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMain(t, env(map[string]string{"LATENT_TOKEN": "from-env"}), "usage", "-node", srv.URL, "-token-file", tokenFile, "-ca", ca, "acme")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := s.requests[len(s.requests)-1]; got != "GET /v1/tenants/acme/usage Bearer from-file" {
		t.Errorf("request %q: the token file wins over the environment", got)
	}
	if !strings.Contains(out, `"tenant": "acme"`) {
		t.Errorf("output %q is not the indented answer", out)
	}
}

// A redirect is never followed: the token stays with the node it was
// meant for, and a PUT answered by a 302 deploys nothing and says so.
func TestRedirectsAreNeverFollowed(t *testing.T) {
	// elsewhere is where the redirects point: a plain-HTTP origin that
	// answers every request as a successful deploy would be answered.
	seen, elsewhere := newStub(t, false)
	seen.status, seen.answer = 200, `{"generation": 42}`
	file := filepath.Join(t.TempDir(), "d.json")
	if err := os.WriteFile(file, deployment(t, "sha256:"+strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, elsewhere.URL+r.URL.Path, status)
			}))
			defer redirector.Close()
			ca := filepath.Join(t.TempDir(), "ca.pem")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redirector.Certificate().Raw}), 0o644); err != nil {
				t.Fatal(err)
			}
			getenv := env(map[string]string{"LATENT_TOKEN": "secret-admin-token"})
			code, out, errOut := runMain(t, getenv, "deploy", "-node", redirector.URL, "-ca", ca, file)
			if code != ExitRefused || strings.Contains(out, "deployed") || !strings.Contains(errOut, "redirect") {
				t.Errorf("deploy answered %d: exit %d, stdout %q, stderr %q", status, code, out, errOut)
			}
			code, out, errOut = runMain(t, getenv, "snapshot", "-node", redirector.URL, "-ca", ca)
			if code != ExitRefused || out != "" {
				t.Errorf("snapshot answered %d: exit %d, stdout %q, stderr %q", status, code, out, errOut)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if len(seen.requests) != 0 {
				t.Errorf("the redirect was followed: %q", seen.requests)
			}
		})
	}
}

// Only 200 is the node's success; any other answer fails.
func TestAnAnswerOtherThanTheDocumentedOneFails(t *testing.T) {
	s, srv := newStub(t, false)
	for _, status := range []int{201, 202, 204, 206} {
		s.status, s.answer = status, `{"generation": 7}`
		code, out, errOut := runMain(t, env(map[string]string{"LATENT_TOKEN": "t"}), "undeploy", "-node", srv.URL, "acme/hello")
		if code != ExitRefused || out != "" || !strings.Contains(errOut, "not the documented 200") {
			t.Errorf("answer %d: exit %d, stdout %q, stderr %q", status, code, out, errOut)
		}
	}
}

// Plain HTTP is refused to a node that is not on loopback, as latentd
// refuses to listen so, unless -insecure-plaintext says otherwise.
func TestPlainHTTPOnlyToLoopback(t *testing.T) {
	getenv := env(map[string]string{"LATENT_TOKEN": "t"})
	for _, node := range []string{"http://192.0.2.1:8080", "http://node1.example:8080", "http://[2001:db8::1]:8080", "http://0.0.0.0:8080"} {
		code, _, errOut := runMain(t, getenv, "snapshot", "-node", node)
		if code != ExitMisuse || !strings.Contains(errOut, "-insecure-plaintext") {
			t.Errorf("%s: exit %d, stderr %q", node, code, errOut)
		}
	}
	// With the flag the request is sent (to a port nothing serves).
	code, _, errOut := runMain(t, getenv, "snapshot", "-insecure-plaintext", "-node", "http://192.0.2.1:1", "-timeout", "1ms")
	if code != ExitInput {
		t.Errorf("with -insecure-plaintext: exit %d, stderr %q", code, errOut)
	}
	for _, node := range []string{"http://localhost:1", "http://127.0.0.2:1", "http://[::1]:1"} {
		code, _, errOut := runMain(t, getenv, "snapshot", "-node", node)
		if code != ExitInput {
			t.Errorf("%s (loopback): exit %d, stderr %q", node, code, errOut)
		}
	}
}

// A 200 whose body is not the documented one fails: a push answer that
// names no digest, or another, and a deploy answer without a generation.
func TestA200WithoutTheDocumentedBodyFails(t *testing.T) {
	s, srv := newStub(t, false)
	dir := t.TempDir()
	artifact := filepath.Join(dir, "guest.wasm")
	if err := os.WriteFile(artifact, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	getenv := env(map[string]string{"LATENT_TOKEN": "t"})
	for _, answer := range []string{`<html>ok</html>`, `{"digest": "sha256:` + strings.Repeat("0", 64) + `"}`, `{}`} {
		s.status, s.answer = 200, answer
		code, out, errOut := runMain(t, getenv, "push", "-node", srv.URL, artifact)
		if code != ExitRefused || out != "" || !strings.Contains(errOut, "does not name") {
			t.Errorf("push answered %s: exit %d, stdout %q, stderr %q", answer, code, out, errOut)
		}
		code, out, errOut = runMain(t, getenv, "undeploy", "-node", srv.URL, "acme/hello")
		if code == ExitOK || out != "" || !strings.Contains(errOut, "names no generation") {
			t.Errorf("undeploy answered %s: exit %d, stdout %q, stderr %q", answer, code, out, errOut)
		}
	}
}
