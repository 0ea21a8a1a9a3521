package core

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAffineOwnership proves from outside the package that a live permit
// cannot be built and that copying one fails go vet.
func TestAffineOwnership(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	t.Run("building a permit outside the package does not compile", func(t *testing.T) {
		out, err := exec.Command(goTool, "build", "-o", "/dev/null", "./testdata/affine/construct").CombinedOutput()
		if err == nil {
			t.Fatal("constructing a permit with unexported fields compiled")
		}
		if !strings.Contains(string(out), "unexported field") && !strings.Contains(string(out), "unknown field") {
			t.Fatalf("failed for another reason:\n%s", out)
		}
	})
	t.Run("the ledger mutex is out of an importer's reach", func(t *testing.T) {
		out, err := exec.Command(goTool, "build", "-o", "/dev/null", "./testdata/affine/mutex").CombinedOutput()
		if err == nil {
			t.Fatal("code outside the ledger reached its mutex")
		}
		text := string(out)
		for _, want := range []string{
			"p.ledger undefined",
			"l.Lock undefined",
			"l.mu undefined",
			"l.ReserveLocked undefined",
			"atomicledger.New(c).Unlock undefined",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("the build did not fail with %q:\n%s", want, text)
			}
		}
	})
	t.Run("copying a permit fails go vet", func(t *testing.T) {
		if out, err := exec.Command(goTool, "build", "-o", "/dev/null", "./testdata/affine/copy").CombinedOutput(); err != nil {
			t.Fatalf("the copy snippet must compile, so only vet rejects it:\n%s", out)
		}
		out, err := exec.Command(goTool, "vet", "./testdata/affine/copy").CombinedOutput()
		if err == nil {
			t.Fatal("go vet accepted a copied permit")
		}
		text := string(out)
		for _, want := range []string{"assignment copies lock value to q: latent.dev/admission/core.AdmissionPermit", "assignment copies lock value to f: latent.dev/admission/core.ExecutionPermit"} {
			if !strings.Contains(text, want) {
				t.Errorf("vet output lacks %q:\n%s", want, text)
			}
		}
	})
}
