package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"latent.dev/admission/edge/latentd/demo"
)

// buildAdmissionctl builds the admissionctl command into dir with the go
// command this test runs under, in the same workspace (or module, with
// GOWORK=off: this module's replace directive names the library), and
// returns the binary's path.
func buildAdmissionctl(t *testing.T, dir string) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building admissionctl needs the go command: %v", err)
	}
	bin := filepath.Join(dir, "admissionctl")
	build := exec.Command(goCmd, "build", "-o", bin, "latent.dev/admission/cmd/admissionctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build admissionctl: %v\n%s", err, out)
	}
	return bin
}

// admissionctl node against a real latentd over loopback, with TLS on and
// off: push, deploy with -artifacts, usage, snapshot, undeploy, and a
// refusal printed with its JSON path.
func TestAdmissionctlNodeAgainstLatentd(t *testing.T) {
	admissionctl := buildAdmissionctl(t, t.TempDir()) // once, for both runs
	for _, withTLS := range []bool{false, true} {
		name := "plain"
		if withTLS {
			name = "tls"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"-tokens", tokenFile(t), "-policy", calmPolicy(t)}
			scheme := "http"
			var caFile string
			if withTLS {
				ca := newTestCA(t)
				certFile, keyFile := ca.issue(t, t.TempDir(), 7)
				args = append(args, "-tls-cert", certFile, "-tls-key", keyFile)
				caFile = writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})))
				scheme = "https"
			}
			s := serve(t, args...)
			defer s.end(t)
			// The binary as an operator runs it: the token and the node
			// in its environment.
			env := append(os.Environ(), "LATENT_TOKEN="+fileAdminToken, "LATENT_NODE="+scheme+"://"+s.addr)
			run := func(args ...string) (int, string, string) {
				if caFile != "" {
					args = append(args[:1:1], append([]string{"-ca", caFile}, args[1:]...)...)
				}
				var out, errOut bytes.Buffer
				cmd := exec.Command(admissionctl, append([]string{"node"}, args...)...)
				cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &errOut
				code := 0
				if err := cmd.Run(); err != nil {
					var exit *exec.ExitError
					if !errors.As(err, &exit) {
						t.Fatalf("admissionctl node %v: %v", args, err)
					}
					code = exit.ExitCode()
				}
				return code, out.String(), errOut.String()
			}

			// The demonstration's guest under a new service, its artifact
			// in a directory laid out as the node's.
			dir := t.TempDir()
			guest := demo.Guest()
			sum := sha256.Sum256(guest)
			hexDigest := hex.EncodeToString(sum[:])
			if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sha256", hexDigest+".wasm"), guest, 0o644); err != nil {
				t.Fatal(err)
			}
			var cat struct{ Deployments []map[string]any }
			if err := json.Unmarshal(demo.CatalogJSON(), &cat); err != nil {
				t.Fatal(err)
			}
			d := cat.Deployments[0]
			d["service"] = "hello2"
			body, _ := json.Marshal(d)
			file := filepath.Join(dir, "hello2.json")
			if err := os.WriteFile(file, body, 0o644); err != nil {
				t.Fatal(err)
			}

			if code, out, errOut := run("push", filepath.Join(dir, "sha256", hexDigest+".wasm")); code != 0 || !strings.Contains(out, "sha256:"+hexDigest) {
				t.Fatalf("push: %d %s %s", code, out, errOut)
			}
			code, out, errOut := run("deploy", "-artifacts", dir, file)
			if code != 0 || !strings.Contains(out, "deployed acme/hello2: generation ") {
				t.Fatalf("deploy: %d %s %s", code, out, errOut)
			}
			if code, out, errOut := run("usage", "acme"); code != 0 || !strings.Contains(out, `"tenant": "acme"`) {
				t.Fatalf("usage: %d %s %s", code, out, errOut)
			}
			if code, out, errOut := run("snapshot"); code != 0 || !strings.Contains(out, "hello2") {
				t.Fatalf("snapshot: %d %s %s", code, out, errOut)
			}
			// A deployment the node's policy refuses: its problem with its path.
			rev := d["routes"].([]any)[0].(map[string]any)["revisions"].([]any)[0].(map[string]any)
			rev["policy"].(map[string]any)["trust_class"] = "no-such-class"
			body, _ = json.Marshal(d)
			if err := os.WriteFile(file, body, 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errOut = run("deploy", file)
			if code != 1 || !strings.Contains(errOut, "$.routes[0].revisions[0].policy.trust_class: is not a trust class") {
				t.Fatalf("a refused deploy: %d %s", code, errOut)
			}
			if code, out, errOut := run("undeploy", "acme/hello2"); code != 0 || !strings.Contains(out, "undeployed acme/hello2") {
				t.Fatalf("undeploy: %d %s %s", code, out, errOut)
			}
			if code, _, errOut := run("undeploy", "acme/hello2"); code != 1 || !strings.Contains(errOut, "404") {
				t.Fatalf("undeploy again: %d %s", code, errOut)
			}
		})
	}
}
