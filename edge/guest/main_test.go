package guest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/edge/internal/guesttest"
	"latent.dev/admission/policy"
)

// shared is built once for the package: the Go guest, compiled from
// testdata/guests/uppercase with the standard toolchain, and a backend
// that has compiled it and the hand-assembled guests once, so no test
// pays for compiling a Go module again.
var shared struct {
	store       *guest.Store
	backend     *guest.Backend
	goGuest     []byte
	buildTime   time.Duration
	compileTime time.Duration
}

// maxResponse is the shared backend's response bound.
const maxResponse = 64 << 10

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "guest-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := setupShared(dir); err != nil {
		fmt.Fprintln(os.Stderr, "guest tests:", err)
		return 1
	}
	code := m.Run()
	if err := shared.backend.Close(context.Background()); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "closing the backend:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

func setupShared(dir string) error {
	ctx := context.Background()
	start := time.Now()
	wasm := filepath.Join(dir, "uppercase.wasm")
	if err := guesttest.BuildGoGuest(ctx, filepath.Join("testdata", "guests", "uppercase"), wasm); err != nil {
		return err
	}
	shared.buildTime = time.Since(start)
	b, err := os.ReadFile(wasm)
	if err != nil {
		return err
	}
	shared.goGuest = b
	store, err := guest.OpenStore(filepath.Join(dir, "artifacts"), 0)
	if err != nil {
		return err
	}
	shared.store = store
	for _, artifact := range [][]byte{b, trapModule, loopModule, bigMemoryModule, growModule, returnModule} {
		if err := store.Put(guest.DigestOf(artifact), bytes.NewReader(artifact)); err != nil {
			return err
		}
	}
	backend, err := guest.New(ctx, guest.Config{Artifacts: store, MaxResponseBytes: maxResponse})
	if err != nil {
		return err
	}
	shared.backend = backend
	start = time.Now()
	if err := backend.Deploy(ctx, guestsDeployment()); err != nil {
		return err
	}
	shared.compileTime = time.Since(start)
	return nil
}

// guestsDeployment is acme/guests: route "upper" runs the Go guest, the
// others the hand-assembled ones.
func guestsDeployment() catalog.Deployment {
	return deployment("acme", "guests", map[string][]byte{"upper": shared.goGuest, "trap": trapModule, "spin": loopModule,
		"bigmem": bigMemoryModule, "grow": growModule, "ret": returnModule})
}

func deployment(tenant, service string, routes map[string][]byte) catalog.Deployment {
	d := catalog.Deployment{Tenant: tenant, Service: service}
	for name, artifact := range routes {
		d.Routes = append(d.Routes, catalog.Route{Name: name, Contract: "text.v1", Function: name, Revisions: []catalog.Revision{{
			Release: catalog.Release{ArtifactDigest: guest.DigestOf(artifact).String(), Version: "1"},
			Weight:  1,
			Policy: policy.RevisionPolicy{TrustClass: "standard", Backend: "wasm", Threading: policy.SingleThreaded,
				StateModel: "stateless"},
		}}})
	}
	return d
}

func TestBuildAndCompileTimes(t *testing.T) {
	// Not a bound (the machine is shared); the figures for the record.
	t.Logf("go build of the Go guest: %v (%d bytes); compiling the deployment's modules: %v",
		shared.buildTime, len(shared.goGuest), shared.compileTime)
	if shared.backend.Modules() != 6 {
		t.Fatalf("%d modules compiled, want 6", shared.backend.Modules())
	}
}
