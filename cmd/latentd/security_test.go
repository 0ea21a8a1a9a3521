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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/latentd/demo"
)

// childEnv makes the test binary run main (see TestMain).
const childEnv = "LATENTD_TEST_CHILD"

// The tokens of tokenFile.
const (
	fileUserToken  = "file-alice"
	fileAdminToken = "file-admin"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// tokenFile writes a token file: alice of acme, and an administrator.
func tokenFile(t *testing.T) string {
	t.Helper()
	return writeFile(t, "tokens.json", `{"tokens":[
 {"sha256":"`+sha256Hex(fileUserToken)+`","kind":"user","subject":"alice","tenant":"acme"},
 {"sha256":"`+sha256Hex(fileAdminToken)+`","admin":true}]}`)
}

// served is serveMain running on a goroutine.
type served struct {
	addr   string
	stop   context.CancelFunc // as SIGTERM does
	code   chan int
	stderr *lockedBuffer
}

// lockedBuffer is a standard error the node's goroutines write while the
// test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve runs serveMain with args until it prints its address.
func serve(t *testing.T, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{stop: cancel, code: make(chan int, 1), stderr: &lockedBuffer{}}
	out := lineWriter{make(chan string, 64)}
	go func() { s.code <- serveMain(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), out, s.stderr) }()
	deadline := time.After(60 * time.Second)
	for s.addr == "" {
		select {
		case line := <-out.lines:
			if a, ok := strings.CutPrefix(line, "latentd: serving on http://"); ok {
				s.addr = a
			}
			if a, ok := strings.CutPrefix(line, "latentd: serving on https://"); ok {
				s.addr = a
			}
		case c := <-s.code:
			t.Fatalf("exited %d: %s", c, s.stderr)
		case <-deadline:
			cancel()
			t.Fatal("not serving")
		}
	}
	return s
}

// end stops the node and wants exit status 0.
func (s *served) end(t *testing.T) {
	t.Helper()
	s.stop()
	select {
	case c := <-s.code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, s.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit")
	}
}

// call sends one request with an optional Host and body.
func call(t *testing.T, method, url, host, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// startOrRefuse runs serveMain with args; it returns the exit status if
// latentd refused to start, or -1 after checking, over loopback HTTP,
// what the node it started answers the demonstration's administrator.
func startOrRefuse(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lineWriter{make(chan string, 64)}
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() { code <- serveMain(ctx, args, out, &stderr) }()
	for {
		select {
		case c := <-code:
			return c, stderr.String()
		case line := <-out.lines:
			addr, ok := strings.CutPrefix(line, "latentd: serving on http://")
			if !ok {
				continue
			}
			status, _ := call(t, http.MethodGet, "http://"+addr+"/v1/admin/snapshot", "", DemoAdminToken, nil)
			t.Errorf("%v started, and the demonstration administrator token got %d from it", args, status)
			cancel()
			<-code
			return -1, ""
		case <-time.After(60 * time.Second):
			t.Fatalf("%v: neither served nor exited", args)
		}
	}
}

func TestTheDemonstrationTokensServeOnlyThePureDemonstration(t *testing.T) {
	policyFile := writeFile(t, "demo-policy.json", string(demo.PolicyJSON()))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-listen", "127.0.0.1:0", "-policy", policyFile}, "-policy without -tokens: the demonstration tokens serve only the pure demonstration"},
		{[]string{"-listen", "127.0.0.1:0", "-store", t.TempDir(), "-artifacts", t.TempDir()}, "-store, -artifacts without -tokens"},
		{[]string{"-listen", "127.0.0.1:0", "-artifacts", t.TempDir()}, "-artifacts without -tokens"},
		{[]string{"-listen", "0.0.0.0:0"}, "-listen 0.0.0.0:0 without -tokens"},
		{[]string{"-listen", ":0"}, "-listen :0 without -tokens"},
		{[]string{"-listen", "[::]:0"}, "without -tokens"},
	} {
		if code, stderr := startOrRefuse(t, tc.args...); code != -1 && (code != 2 || !strings.Contains(stderr, tc.want)) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	t.Run("the pure demonstration still serves them", func(t *testing.T) {
		s := serve(t)
		defer s.end(t)
		if code, body := call(t, http.MethodGet, "http://"+s.addr+"/v1/admin/snapshot", "", DemoAdminToken, nil); code != http.StatusOK {
			t.Errorf("%d %s", code, body)
		}
	})
}

func TestAStoreWithoutArtifactsIsRefused(t *testing.T) {
	code, stderr := startOrRefuse(t, "-listen", "127.0.0.1:0", "-store", t.TempDir(), "-tokens", tokenFile(t))
	if code != -1 && (code != 2 || !strings.Contains(stderr, "-store needs -artifacts")) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

func TestTheDemonstrationAdministrationAnswersLoopbackHostsOnly(t *testing.T) {
	s := serve(t, "-allowed-host", "node.example")
	defer s.end(t)
	base := "http://" + s.addr
	for _, host := range []string{"", "localhost", "node.example:80"} {
		if code, body := call(t, http.MethodGet, base+"/v1/admin/snapshot", host, DemoAdminToken, nil); code != http.StatusOK {
			t.Errorf("Host %q: %d %s", host, code, body)
		}
	}
	for _, host := range []string{"rebound.example", "rebound.example:" + s.addr[strings.LastIndex(s.addr, ":")+1:]} {
		for _, path := range []string{"/v1/admin/snapshot", "/v1/admin/status", "/debug/pprof/"} {
			code, body := call(t, http.MethodGet, base+path, host, DemoAdminToken, nil)
			var e struct{ Error, Header string }
			if code != http.StatusForbidden || json.Unmarshal(body, &e) != nil || e.Header != "Host" {
				t.Errorf("%s with Host %q: %d %s", path, host, code, body)
			}
		}
	}
}

// demoDeploymentJSON is the demonstration catalog's one deployment, as
// the deploy endpoint takes it.
func demoDeploymentJSON(t *testing.T) []byte {
	t.Helper()
	var file struct{ Deployments []json.RawMessage }
	if err := json.Unmarshal(demo.CatalogJSON(), &file); err != nil || len(file.Deployments) != 1 {
		t.Fatalf("the demonstration catalog: %v", err)
	}
	return file.Deployments[0]
}

func TestAStoreAndItsArtifactsSurviveARestart(t *testing.T) {
	store, artifacts, tokens := filepath.Join(t.TempDir(), "store"), t.TempDir(), tokenFile(t)
	args := []string{"-store", store, "-artifacts", artifacts, "-tokens", tokens}
	s := serve(t, args...)
	base := "http://" + s.addr
	if code, body := call(t, http.MethodGet, base+"/v1/admin/snapshot", "", DemoAdminToken, nil); code != http.StatusUnauthorized {
		t.Errorf("the demonstration administrator token with -tokens: %d %s", code, body)
	}
	digest := strings.TrimPrefix(demo.GuestDigest(), "sha256:")
	if code, body := call(t, http.MethodPut, base+"/v1/admin/artifacts/sha256/"+digest, "", fileAdminToken, demo.Guest()); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := call(t, http.MethodPut, base+"/v1/admin/deployments/acme/hello", "", fileAdminToken, demoDeploymentJSON(t)); code != http.StatusOK {
		t.Fatalf("deploy: %d %s", code, body)
	}
	s.end(t)

	// The restart itself proves the artifact is still there: a start
	// compiles every stored deployment's artifacts, and fails without
	// them (TestAMissingOrCorruptArtifactAtStartExitsOneNamingIt).
	again := serve(t, args...)
	defer again.end(t)
	// The node samples this machine's real load: on a loaded machine
	// admission may refuse with node-overloaded for a while, which still
	// says the route resolved (an unknown route is 404 before admission).
	for attempt := 1; ; attempt++ {
		code, body := call(t, http.MethodPost, "http://"+again.addr+"/v1/invoke/acme/hello/greet", "", fileUserToken, []byte("again"))
		if code == http.StatusOK && string(body) == "hello, again" {
			return
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"node-overloaded"`) {
			t.Fatalf("after the restart: %d %s", code, body)
		}
		if attempt == 40 {
			t.Logf("the machine stayed overloaded; the route resolved: %d %s", code, body)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestAMissingOrCorruptArtifactAtStartExitsOneNamingIt(t *testing.T) {
	deployments, err := demo.Deployments()
	if err != nil {
		t.Fatal(err)
	}
	digest := strings.TrimPrefix(demo.GuestDigest(), "sha256:")
	for _, tc := range []struct {
		name     string
		artifact []byte // nil: missing
	}{
		{"missing", nil},
		{"corrupt", []byte("\x00asm\x01\x00\x00\x00 not the module the digest names")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, artifacts := filepath.Join(t.TempDir(), "store"), t.TempDir()
			c, err := catalog.Create(store, catalog.GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Deploy(deployments[0]); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.artifact != nil {
				if err := os.MkdirAll(filepath.Join(artifacts, "sha256"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(artifacts, "sha256", digest+".wasm"), tc.artifact, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stderr bytes.Buffer
			code := serveMain(context.Background(), []string{"-listen", "127.0.0.1:0", "-store", store, "-artifacts", artifacts,
				"-tokens", tokenFile(t)}, io.Discard, &stderr)
			if code != 1 || !strings.Contains(stderr.String(), digest) || strings.Contains(stderr.String(), "goroutine") {
				t.Fatalf("exit %d, want 1 naming %s: %s", code, digest, stderr.String())
			}
			t.Log(strings.TrimSpace(stderr.String()))
			// Nothing is left holding the store.
			c, err = catalog.Open(store)
			if err != nil {
				t.Fatalf("the store after the failed start: %v", err)
			}
			_ = c.Close()
		})
	}
}

// child is the test binary running latentd's main in a process of its
// own.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *logBuffer
	done   chan struct{}
}

func startChild(t *testing.T, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64), stderr: &logBuffer{}, done: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range c.lines {
		}
		_ = cmd.Wait()
	})
	return c
}

// waitLine waits for a line of standard output with prefix and returns
// the rest of it.
func (c *child) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("standard output ended before %q; stderr: %s", prefix, c.stderr)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
		case <-deadline:
			t.Fatalf("no line %q", prefix)
		}
	}
}

func TestASecondSignalEndsTheProcessAtOnce(t *testing.T) {
	c := startChild(t, "-listen", "127.0.0.1:0", "-grace", "10m")
	addr := c.waitLine(t, "latentd: serving on http://")

	// An invocation whose body never comes: the node's handler waits in
	// the read (it asked for the body: 100 Continue), so the shutdown
	// waits for it far longer than the test does.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /v1/invoke/acme/hello/greet HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+
		DemoUserToken+"\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if status, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(status, "HTTP/1.1 100") {
		t.Fatalf("%q %v", status, err)
	}

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitLine(t, "latentd: shutting down")
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range c.lines {
	}
	err = c.cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(c.stderr.String(), "second signal") {
		t.Fatalf("%v, want exit status 1 after the second signal; stderr: %s", err, c.stderr)
	}
}
