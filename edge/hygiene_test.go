package edge_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// edgeOnly are modules that the edge may bring and an embedder of core,
// policy and catalog must never see.
var edgeOnly = []string{"github.com/prometheus/client_golang", "github.com/tetratelabs/wazero", "github.com/chromedp/chromedp",
	"go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/api/v3", "google.golang.org/grpc"}

// goList runs the go command's list with args in dir, outside any
// workspace, and returns the first field of each line. Extra environment
// comes last.
func goList(t *testing.T, dir string, env []string, args ...string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	cmd := exec.Command(gobin, append([]string{"list"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v in %s: %v\n%s", args, dir, err, out)
	}
	var fields []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			fields = append(fields, f[0])
		}
	}
	return fields
}

func contains(modules []string, path string) bool {
	for _, m := range modules {
		if m == path {
			return true
		}
	}
	return false
}

// consumerCopy copies testdata/consumer into a temporary directory, with
// its replace directive pointing at the repository root, so that the go
// command may complete its go.sum there and the committed one stays tidy.
func consumerCopy(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "testdata", "consumer")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "main.go"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "go.mod" {
			if !strings.Contains(string(data), "=> ../..") {
				t.Fatalf("%s/go.mod no longer replaces the library with ../..", src)
			}
			data = []byte(strings.ReplaceAll(string(data), "=> ../..", "=> "+root))
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// An embedder that imports only core, policy and catalog gets none of the
// edge's modules (the Prometheus client, the Wasm runtime, the browser
// driver of the edge's tests, the etcd client of the fleet broker) in its
// module graph.
func TestConsumerOfTheLibraryGetsNoEdgeDependency(t *testing.T) {
	// -mod=mod lets go list complete the copy's go.sum with the go.mod
	// hashes of the whole graph.
	modules := goList(t, consumerCopy(t), []string{"GOFLAGS=-mod=mod"}, "-m", "all")
	if !contains(modules, "latent.dev/admission") {
		t.Fatalf("the consumer does not depend on the library at all: %v", modules)
	}
	for _, m := range edgeOnly {
		if contains(modules, m) {
			t.Errorf("the consumer's module graph names %s:\n%s", m, strings.Join(modules, "\n"))
		}
	}
}

// The check above can fail: the edge module does build with the
// Prometheus client.
func TestTheEdgeModuleBuildsWithThePrometheusClient(t *testing.T) {
	if deps := goList(t, ".", nil, "-deps", "./metrics"); !contains(deps, "github.com/prometheus/client_golang/prometheus") {
		t.Errorf("edge/metrics does not depend on the Prometheus client: %v", deps)
	}
}

// Nor can it for etcd: the fleet broker depends on its client.
func TestTheEdgeModuleBuildsWithTheEtcdClient(t *testing.T) {
	if deps := goList(t, ".", nil, "-deps", "./fleet"); !contains(deps, "go.etcd.io/etcd/client/v3") {
		t.Errorf("edge/fleet does not depend on the etcd client: %v", deps)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The consumer builds against the library's public API alone and runs.
func TestConsumerBuildsAgainstThePublicAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	dir := consumerCopy(t)
	policyFile, err := filepath.Abs(filepath.Join("..", "testdata", "policy", "node.json"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "run", "-mod=mod", ".", policyFile)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the consumer does not build or run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "catalog generation 0") {
		t.Fatalf("consumer printed %q", out)
	}
}
