package guest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/edge/internal/guesttest"
	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/pipeline"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/policy"
)

// ownBackend is a fresh backend over a fresh store holding artifacts.
func ownBackend(t testing.TB, cfg guest.Config, artifacts ...[]byte) (*guest.Backend, *guest.Store) {
	t.Helper()
	store, err := guest.OpenStore(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range artifacts {
		if err := store.Put(guest.DigestOf(a), bytes.NewReader(a)); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Artifacts = store
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = 1024
	}
	b, err := guest.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return b, store
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	store, err := guest.OpenStore(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]guest.Config{
		"no store":                  {MaxResponseBytes: 1},
		"no response bound":         {Artifacts: store},
		"a memory ceiling below 1p": {Artifacts: store, MaxResponseBytes: 1, MaxMemoryBytes: 65535},
	} {
		t.Run(name, func(t *testing.T) {
			if b, err := guest.New(context.Background(), cfg); err == nil {
				_ = b.Close(context.Background())
				t.Fatal("New accepted it")
			}
		})
	}
}

func TestDeployRefusesWhatItCannotRun(t *testing.T) {
	missing := command(2) // never put in the store
	for _, tc := range []struct {
		name     string
		artifact []byte
		digest   string // overrides the artifact's digest
		damage   bool   // overwrite the stored file after Put
		want     error
		file     bool // the error names the file
	}{
		{name: "a digest that is not sha256 and 64 hex digits", digest: "sha256:9f2c41d0", want: guest.ErrBadDigest},
		{name: "a missing artifact", artifact: missing, want: guest.ErrArtifactNotFound, file: true},
		{name: "an artifact damaged on disk", artifact: returnModule, damage: true, want: guest.ErrDigestMismatch, file: true},
		{name: "bytes that are not a module", artifact: corruptModule, want: guest.ErrInvalidModule, file: true},
		{name: "a module without _start", artifact: noStartModule, want: guest.ErrNotCommand, file: true},
		{name: "a module importing from outside WASI", artifact: foreignImportModule, want: guest.ErrNotCommand, file: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := [][]byte{returnModule}
			if tc.artifact != nil && !bytes.Equal(tc.artifact, missing) {
				stored = append(stored, tc.artifact)
			}
			b, store := ownBackend(t, guest.Config{}, stored...)
			if tc.damage {
				write(t, store.Path(guest.DigestOf(tc.artifact)), []byte("overwritten"))
			}
			d := deployment("acme", "svc", map[string][]byte{"good": returnModule})
			digest := tc.digest
			if digest == "" {
				digest = guest.DigestOf(tc.artifact).String()
			}
			d.Routes = append(d.Routes, catalog.Route{Name: "bad", Contract: "c", Function: "f", Revisions: []catalog.Revision{{
				Release: catalog.Release{ArtifactDigest: digest, Version: "1"}, Weight: 1}}})
			err := b.Deploy(context.Background(), d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Deploy: %v, want %v", err, tc.want)
			}
			var ae *guest.ArtifactError
			if tc.file && (!errors.As(err, &ae) || !strings.Contains(err.Error(), digest) || !strings.Contains(err.Error(), store.Path(ae.Digest))) {
				t.Fatalf("error %q does not name the digest and the file", err)
			}
			if b.Modules() != 0 {
				t.Fatalf("a refused deployment left %d modules compiled", b.Modules())
			}
		})
	}
}

func TestTheMemoryCeilingRefusesLargerModulesAtDeploy(t *testing.T) {
	b, _ := ownBackend(t, guest.Config{MaxMemoryBytes: 4 << 20}, bigMemoryModule)
	err := b.Deploy(context.Background(), deployment("acme", "svc", map[string][]byte{"big": bigMemoryModule}))
	if !errors.Is(err, guest.ErrInvalidModule) {
		t.Fatalf("Deploy of a 100-page module under a 64-page ceiling: %v", err)
	}
}

func TestModulesAreCompiledOncePerDigestAndClosedWhenUnreferenced(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, returnModule, trapModule)
	if err := b.Deploy(ctx, deployment("acme", "one", map[string][]byte{"a": returnModule, "b": returnModule})); err != nil {
		t.Fatal(err)
	}
	if err := b.Deploy(ctx, deployment("acme", "two", map[string][]byte{"a": returnModule})); err != nil {
		t.Fatal(err)
	}
	if b.Modules() != 1 {
		t.Fatalf("%d modules for one digest", b.Modules())
	}
	// Replacing acme/one with another artifact keeps the shared one for
	// acme/two.
	if err := b.Deploy(ctx, deployment("acme", "one", map[string][]byte{"a": trapModule})); err != nil {
		t.Fatal(err)
	}
	if b.Modules() != 2 {
		t.Fatalf("%d modules, want both", b.Modules())
	}
	b.Undeploy("acme", "two")
	if b.Modules() != 1 {
		t.Fatalf("%d modules after the only user of one left", b.Modules())
	}
	b.Undeploy("acme", "one")
	b.Undeploy("acme", "never-deployed")
	if b.Modules() != 0 {
		t.Fatalf("%d modules with no deployment", b.Modules())
	}
}

func TestTheModuleCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{MaxModules: 1}, returnModule, trapModule)
	if err := b.Deploy(ctx, deployment("acme", "one", map[string][]byte{"a": returnModule, "b": trapModule})); !errors.Is(err, guest.ErrTooManyModules) {
		t.Fatalf("Deploy of two modules into a cache of one: %v", err)
	}
	if b.Modules() != 0 {
		t.Fatalf("%d modules after a refused deployment", b.Modules())
	}
	if err := b.Deploy(ctx, deployment("acme", "one", map[string][]byte{"a": returnModule})); err != nil {
		t.Fatal(err)
	}
	if err := b.Deploy(ctx, deployment("acme", "two", map[string][]byte{"a": trapModule})); !errors.Is(err, guest.ErrTooManyModules) {
		t.Fatalf("a second digest beyond the cache: %v", err)
	}
	// Replacing the one deployment frees its slot first only after the
	// new module is in, so a swap needs room for both.
	b.Undeploy("acme", "one")
	if err := b.Deploy(ctx, deployment("acme", "two", map[string][]byte{"a": trapModule})); err != nil {
		t.Fatal(err)
	}
}

func TestAClosedBackendRefusesDeploysAndRuns(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, returnModule)
	if err := b.Deploy(ctx, deployment("acme", "guests", map[string][]byte{"ret": returnModule})); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Deploy(ctx, deployment("acme", "guests", map[string][]byte{"ret": returnModule})); !errors.Is(err, guest.ErrClosed) {
		t.Fatalf("Deploy after Close: %v", err)
	}
	rep := runOn(t, b, deployment("acme", "guests", map[string][]byte{"ret": returnModule}), ask{route: "ret", fuel: roomyFuel, memory: 1 << 20})
	if rep.Outcome != runner.PlatformFailure || rep.Disposition != runner.Released {
		t.Fatalf("run after Close: %+v", rep)
	}
}

// runOn runs one activation of d's route on backend b through the runner.
func runOn(t *testing.T, b *guest.Backend, d catalog.Deployment, a ask) runner.Report {
	t.Helper()
	run := startOn(t, b, d, a)
	rep, err := run()
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// startOn admits one activation of d's route and leases its cell; the
// function it returns runs it on b through the runner, with the permit's
// deadline on the context as the scheduler sets it, and may be called
// from another goroutine. Its error is a permit that was not released.
func startOn(t *testing.T, b *guest.Backend, d catalog.Deployment, a ask) func() (runner.Report, error) {
	t.Helper()
	n := newNode(t, d)
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": b}})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := n.controller.Admit(n.request(t, d.Tenant, d.Service, a))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Acquire(policy.Small)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := permit.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	return func() (runner.Report, error) {
		ctx, cancel := context.WithDeadline(context.Background(), exec.Grant().Deadline)
		defer cancel()
		act := r.NewActivation([]byte(a.input))
		grant := exec.Grant()
		act.Run(ctx, &grant, lease)
		exec.Release() // the scheduler's, once Run returns
		act.End(nil)
		rep, _ := act.Wait(context.Background())
		if n.provider.LiveReservations() != 0 {
			return rep, errors.New("permit not released")
		}
		return rep, nil
	}
}

// waitBusy waits until a guest has taken its module to run it: until
// then the modules hold only the references they held before, base. The
// wait is for the guest's start, which a loaded machine may delay by
// seconds.
func waitBusy(t *testing.T, b *guest.Backend, base int) {
	t.Helper()
	for start := time.Now(); guest.ModuleRefs(b) <= base; time.Sleep(time.Millisecond) {
		if time.Since(start) > 2*time.Minute {
			t.Fatal("the guest never started on its cell")
		}
	}
}

// inBackground runs run on its own goroutine; the channel gets its report.
func inBackground(t *testing.T, run func() (runner.Report, error)) <-chan runner.Report {
	done := make(chan runner.Report, 1)
	go func() {
		rep, err := run()
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	return done
}

func TestARevisionTheBackendDoesNotHoldIsAPlatformFailure(t *testing.T) {
	b, _ := ownBackend(t, guest.Config{}, returnModule)
	// Admitted by a catalog that has the deployment, but never deployed
	// to the backend (or undeployed since).
	rep := runOn(t, b, deployment("acme", "guests", map[string][]byte{"ret": returnModule}), ask{route: "ret", fuel: roomyFuel, memory: 1 << 20})
	if rep.Outcome != runner.PlatformFailure || rep.Disposition != runner.Released {
		t.Fatalf("report %+v", rep)
	}
}

func TestUndeployingWhileAGuestRunsKeepsItsModuleUntilItStops(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, loopModule)
	d := deployment("acme", "guests", map[string][]byte{"spin": loopModule})
	if err := b.Deploy(ctx, d); err != nil {
		t.Fatal(err)
	}
	run := startOn(t, b, d, ask{route: "spin", fuel: roomyFuel, memory: 1 << 20, wall: 5 * time.Second})
	base := guest.ModuleRefs(b)
	done := inBackground(t, run)
	waitBusy(t, b, base)
	b.Undeploy("acme", "guests")
	if b.Modules() != 1 {
		t.Fatalf("%d modules while a guest runs, want its own kept", b.Modules())
	}
	rep := <-done
	if rep.Outcome != runner.DeadlineExceeded || rep.Disposition != runner.Released {
		t.Fatalf("report %+v", rep)
	}
	if b.Modules() != 0 {
		t.Fatalf("%d modules after the last guest stopped", b.Modules())
	}
}

func TestCancellingTheActivationInterruptsTheGuest(t *testing.T) {
	n := sharedNode(t)
	pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": shared.backend}})
	if err != nil {
		t.Fatal(err)
	}
	permit, err := n.controller.Admit(n.request(t, "acme", "guests", ask{route: "upper", input: "!loop", fuel: roomyFuel, memory: 32 << 20}))
	if err != nil {
		t.Fatal(err)
	}
	lease, _ := pool.Acquire(policy.Small)
	exec, err := permit.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	act := r.NewActivation([]byte("!loop"))
	grant := exec.Grant()
	act.Run(ctx, &grant, lease)
	exec.Release() // the scheduler's, once Run returns
	act.End(nil)
	rep, err := act.Wait(context.Background())
	if rep.Outcome != runner.Canceled || !errors.Is(err, runner.ErrCanceled) || rep.Disposition != runner.Released {
		t.Fatalf("report %+v, %v", rep, err)
	}
}

func TestTheResponseBoundIsInclusive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		outcome runner.Outcome
	}{
		{"output of exactly the bound succeeds", maxResponse, runner.Succeeded},
		{"one byte more traps", maxResponse + 1, runner.Trapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := strings.Repeat("a", tc.size)
			rep := runOn(t, shared.backend, guestsDeployment(), ask{route: "upper", input: input, fuel: roomyFuel, memory: 32 << 20})
			if rep.Outcome != tc.outcome || rep.Disposition != runner.Released {
				t.Fatalf("report %v %v", rep.Outcome, rep.Disposition)
			}
			if tc.outcome == runner.Succeeded && string(rep.Output) != strings.ToUpper(input) {
				t.Fatal("output is not the whole upper-cased input")
			}
			if tc.outcome == runner.Trapped && len(rep.Output) != 0 {
				t.Fatal("a trapped guest's output was kept")
			}
		})
	}
}

func TestBuildGoGuestReportsACompileError(t *testing.T) {
	dir := t.TempDir()
	write(t, dir+"/go.mod", []byte("module broken\n\ngo 1.26.0\n"))
	write(t, dir+"/main.go", []byte("package main\n\nfunc main() { undefined() }\n"))
	err := guesttest.BuildGoGuest(context.Background(), dir, dir+"/out.wasm")
	var be *guesttest.BuildError
	if !errors.Is(err, guesttest.ErrBuild) || !errors.As(err, &be) || !bytes.Contains(be.Output, []byte("undefined")) {
		t.Fatalf("BuildGoGuest: %v", err)
	}
	if _, err := os.Stat(dir + "/out.wasm"); !os.IsNotExist(err) {
		t.Fatal("a failed build left an output file")
	}
}

func TestBuildGoGuestIsReproducible(t *testing.T) {
	out := t.TempDir() + "/again.wasm"
	if err := guesttest.BuildGoGuest(context.Background(), "testdata/guests/uppercase", out); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if guest.DigestOf(again) != guest.DigestOf(shared.goGuest) {
		t.Fatal("two builds of one source with one toolchain differ")
	}
}

func TestClosingTheBackendEndsARunningGuestAsAPlatformFailure(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, loopModule)
	d := deployment("acme", "guests", map[string][]byte{"spin": loopModule})
	if err := b.Deploy(ctx, d); err != nil {
		t.Fatal(err)
	}
	run := startOn(t, b, d, ask{route: "spin", fuel: roomyFuel, memory: 1 << 20, wall: 20 * time.Second})
	base := guest.ModuleRefs(b)
	done := inBackground(t, run)
	waitBusy(t, b, base)
	start := time.Now()
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep := <-done
	// Close ends the guest at once; the bound (well under the guest's
	// 20 s) leaves a loaded machine its time.
	if rep.Outcome != runner.PlatformFailure || rep.Disposition != runner.Released || time.Since(start) > 15*time.Second {
		t.Fatalf("report %+v after %v", rep, time.Since(start))
	}
}

func TestGuestsRunInParallelOnTheirCells(t *testing.T) {
	n := sharedNode(t)
	p, err := pipeline.New(n.provider, pipeline.Config{Backends: map[string]runner.Backend{"wasm": shared.backend}})
	if err != nil {
		t.Fatal(err)
	}
	base := p.Counters()
	inputs := []string{"one", "!exit 4", "two", "!flood", "three", "!exit 5", "four", "five"}
	reports := make([]runner.Report, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		req := n.request(t, "acme", "guests", ask{route: "upper", input: in, fuel: roomyFuel, memory: 16 << 20})
		wg.Go(func() {
			reports[i], _ = p.Invoke(context.Background(), n.controller, req, []byte(in))
		})
	}
	wg.Wait()
	p.Drain()
	for i, in := range inputs {
		rep := reports[i]
		want, output := runner.Succeeded, strings.ToUpper(in)
		switch {
		case strings.HasPrefix(in, "!exit"):
			want, output = runner.DeclaredError, "declared error "+in[len("!exit "):]+"\n"
		case in == "!flood":
			want, output = runner.Trapped, ""
		}
		if rep.Outcome != want || string(rep.Output) != output || rep.Disposition != runner.Released {
			t.Errorf("%q: %v %q %v", in, rep.Outcome, truncate(rep.Output), rep.Disposition)
		}
	}
	if got := p.Counters(); !got.Equal(base) {
		t.Fatalf("counters did not come back:\n%s", strings.Join(got.Diff(base), "\n"))
	}
}

func TestConcurrentDeploysOfOneDigestShareOneModule(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, loopModule)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = b.Deploy(ctx, deployment("acme", "svc-"+string(rune('a'+i)), map[string][]byte{"spin": loopModule}))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b.Modules() != 1 {
		t.Fatalf("%d modules for one digest deployed eight times at once", b.Modules())
	}
	for i := range errs {
		b.Undeploy("acme", "svc-"+string(rune('a'+i)))
	}
	if b.Modules() != 0 {
		t.Fatalf("%d modules after every deployment left", b.Modules())
	}
}
