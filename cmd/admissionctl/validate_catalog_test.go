package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runValidateCatalog(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"validate", "catalog"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

const (
	goodCatalog     = "../../testdata/catalog/good.json"
	badCatalog      = "../../testdata/catalog/bad.json"
	mismatchCatalog = "../../testdata/catalog/node-mismatch.json"
	nodePolicy      = "../../testdata/policy/node.json"
)

func TestValidateCatalog(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a good catalog is ok", []string{goodCatalog}, 0, []string{"ok"}},
		{"a bad catalog lists every problem with its path", []string{badCatalog}, 1, []string{
			"capacity.max_revisions: must not be negative",
			"capacity.max_policy_bytes: missing",
			"deployments[0].routes[0].revisions[0].policy.threading: must be single or multi",
			"deployments[0].routes[0].revisions[0].policy.deployment_ceiling.wall_time_ms: expected a non-negative whole number, got a string",
			"deployments[0].routes[0].color: unknown key",
			"deployments[0].routes[0].revisions[0].policy.features[1]: duplicates deployments[0].routes[0].revisions[0].policy.features[0]",
			"deployments[0].routes[1].contract: is not a valid identifier (1 to 255 bytes of UTF-8 without white space or control characters)",
			"deployments[0].routes[1].route: duplicates deployments[0].routes[0]",
			"deployments[0].routes[1].revisions: must list at least one revision",
			"deployments[1]: duplicates deployments[0] (same tenant and service)",
		}},
		{"--policy after the file finds a backend the node lacks", []string{goodCatalog, "--policy", nodePolicy}, 1, []string{
			"deployments[0].routes[3].revisions[0].policy.backend: is not a backend of the node (node.backends)",
		}},
		{"--policy before the file", []string{"--policy", nodePolicy, goodCatalog}, 1, []string{
			"deployments[0].routes[3].revisions[0].policy.backend: is not a backend of the node (node.backends)",
		}},
		{"--policy=FILE", []string{"--policy=" + nodePolicy, goodCatalog}, 1, []string{
			"deployments[0].routes[3].revisions[0].policy.backend: is not a backend of the node (node.backends)",
		}},
		{"--policy checks trust class, backend, state model and identifier bytes", []string{mismatchCatalog, "--policy", nodePolicy}, 1, []string{
			"deployments[0].service: is not a valid identifier on this node (1 to 64 bytes of UTF-8 without white space or control characters)",
			"deployments[0].routes[0].revisions[0].policy.trust_class: is not a trust class of the node policy",
			"deployments[0].routes[0].revisions[0].policy.backend: is not a backend of the node (node.backends)",
			"deployments[0].routes[0].revisions[0].policy.state_model: is not a state model of the node (node.state_models)",
		}},
		{"without --policy the node's rules are not applied", []string{mismatchCatalog}, 0, []string{"ok"}},
		{"--policy does not repeat a problem the file already has", []string{badCatalog, "--policy", nodePolicy}, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runValidateCatalog(tt.args...)
			if code != tt.code || stderr != "" {
				t.Fatalf("exit %d (want %d), stderr %q, stdout:\n%s", code, tt.code, stderr, stdout)
			}
			if tt.want == nil {
				return
			}
			if want := strings.Join(tt.want, "\n") + "\n"; stdout != want {
				t.Fatalf("stdout:\n%s\nwant:\n%s", stdout, want)
			}
		})
	}
}

func TestValidateCatalogWithPolicyAddsOnlyNodeProblems(t *testing.T) {
	_, alone, _ := runValidateCatalog(badCatalog)
	_, withPolicy, _ := runValidateCatalog(badCatalog, "--policy", nodePolicy)
	if alone != withPolicy {
		t.Fatalf("--policy changed the report of a file whose revisions all fit the node:\n%s\nvs\n%s", alone, withPolicy)
	}
}

func TestValidateCatalogFileErrors(t *testing.T) {
	dir := t.TempDir()
	badPolicy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(badPolicy, []byte(`{"node": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, tt := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // prefixes
	}{
		{"a missing catalog file", []string{missing}, exitUnreadable, "", missing + ": no such file or directory"},
		{"a missing policy file", []string{goodCatalog, "--policy", missing}, exitUnreadable, "", missing + ": no such file or directory"},
		{"an invalid policy file", []string{goodCatalog, "--policy", badPolicy}, exitProblems, badPolicy + ": the node policy is not valid:\nnode.placement: missing\n", ""},
		{"not JSON", []string{"validate_catalog.go"}, exitProblems, "invalid JSON", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runValidateCatalog(tt.args...)
			if code != tt.code || !strings.HasPrefix(stdout, tt.stdout) || !strings.HasPrefix(stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit %d and prefixes %q, %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

func TestValidateCatalogMisuse(t *testing.T) {
	for _, args := range [][]string{
		{},
		{goodCatalog, badCatalog},
		{goodCatalog, "--policy"},
		{goodCatalog, "--policy="},
		{goodCatalog, "--policy", nodePolicy, "--policy", nodePolicy},
		{goodCatalog, "--verbose"},
	} {
		code, stdout, stderr := runValidateCatalog(args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "usage: admissionctl validate catalog FILE [--policy FILE]") {
			t.Errorf("validate catalog %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
