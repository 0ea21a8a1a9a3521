package guest_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/runner"
)

// withVersion is d with every release's version set to v: the same
// modules under other release IDs.
func withVersion(d catalog.Deployment, v string) catalog.Deployment {
	out := d
	out.Routes = nil
	for _, r := range d.Routes {
		revs := append([]catalog.Revision(nil), r.Revisions...)
		for i := range revs {
			revs[i].Release.Version = v
		}
		r.Revisions = revs
		out.Routes = append(out.Routes, r)
	}
	return out
}

func TestPrepareSwitchesNothingUntilCommit(t *testing.T) {
	b, _ := ownBackend(t, guest.Config{}, returnModule, trapModule)
	d := deployment("acme", "guests", map[string][]byte{"ret": returnModule})
	a := ask{route: "ret", fuel: roomyFuel, memory: 1 << 20}
	p, err := b.Prepare(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if b.Modules() != 1 {
		t.Fatalf("%d modules prepared, want 1", b.Modules())
	}
	if rep := runOn(t, b, d, a); rep.Outcome != runner.PlatformFailure {
		t.Fatalf("before Commit: %+v, want a platform failure (not deployed)", rep)
	}
	previous, err := p.Commit()
	if err != nil {
		t.Fatal(err)
	}
	previous.Discard() // the pair had nothing
	p.Discard()        // spent: nothing
	if rep := runOn(t, b, d, a); rep.Outcome != runner.Succeeded {
		t.Fatalf("after Commit: %+v", rep)
	}
	// A prepared deployment that is discarded leaves nothing behind.
	other, err := b.Prepare(context.Background(), deployment("acme", "guests", map[string][]byte{"ret": trapModule}))
	if err != nil {
		t.Fatal(err)
	}
	other.Discard()
	if b.Modules() != 1 {
		t.Fatalf("%d modules after a discarded prepare, want the deployed one", b.Modules())
	}
	if rep := runOn(t, b, d, a); rep.Outcome != runner.Succeeded {
		t.Fatalf("after a discarded prepare: %+v", rep)
	}
	// Commit returns what it replaced, which restores the pair.
	p2, err := b.Prepare(context.Background(), withVersion(d, "2"))
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := p2.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if rep := runOn(t, b, d, a); rep.Outcome != runner.PlatformFailure {
		t.Fatalf("release 1 after the switch to 2: %+v", rep)
	}
	undone, err := replaced.Commit()
	if err != nil {
		t.Fatal(err)
	}
	undone.Discard()
	if rep := runOn(t, b, d, a); rep.Outcome != runner.Succeeded {
		t.Fatalf("release 1 restored: %+v", rep)
	}
}

// Issue 23, item 6: a deploy whose context has ended compiles nothing and
// says so with the context's error (not as a module that failed).
func TestPrepareAbandonsWhenItsContextEnds(t *testing.T) {
	for name, ctxFor := range map[string]func() (context.Context, context.CancelFunc){
		"ended before": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		},
		// Most likely while wazero compiles the Go guest (seconds), which
		// it then stops between functions; earlier is the case above.
		"ending during the compile": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		},
	} {
		t.Run(name, func(t *testing.T) {
			b, _ := ownBackend(t, guest.Config{}, shared.goGuest)
			ctx, cancel := ctxFor()
			defer cancel()
			_, err := b.Prepare(ctx, deployment("acme", "guests", map[string][]byte{"upper": shared.goGuest}))
			if !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
				t.Fatalf("Prepare under an ended context: %v (context: %v)", err, ctx.Err())
			}
			if b.Modules() != 0 {
				t.Fatalf("%d modules compiled for an abandoned deploy", b.Modules())
			}
		})
	}
}

// Issue 23, item 4: an activation admitted for release 1 runs it after
// the pair was redeployed as release 2, and after it was undeployed, for
// as long as a hold keeps it; then it is gone.
func TestAHeldReleaseRunsAcrossARedeployAndAnUndeploy(t *testing.T) {
	ctx := context.Background()
	b, _ := ownBackend(t, guest.Config{}, returnModule)
	d := deployment("acme", "guests", map[string][]byte{"ret": returnModule})
	a := ask{route: "ret", fuel: roomyFuel, memory: 1 << 20}
	if _, ok := b.Hold("acme", "guests", catalog.ReleaseID(d.Routes[0].Revisions[0].Release)); ok {
		t.Fatal("a hold on a release nothing deploys")
	}
	if err := b.Deploy(ctx, d); err != nil {
		t.Fatal(err)
	}
	done, ok := b.Hold("acme", "guests", catalog.ReleaseID(d.Routes[0].Revisions[0].Release))
	if !ok {
		t.Fatal("no hold on the deployed release")
	}
	again, ok := b.Hold("acme", "guests", catalog.ReleaseID(d.Routes[0].Revisions[0].Release))
	if !ok {
		t.Fatal("no second hold")
	}
	if err := b.Deploy(ctx, withVersion(d, "2")); err != nil {
		t.Fatal(err)
	}
	if rep := runOn(t, b, d, a); rep.Outcome != runner.Succeeded {
		t.Fatalf("release 1, held, after the redeploy as 2: %+v", rep)
	}
	b.Undeploy("acme", "guests")
	if rep := runOn(t, b, d, a); rep.Outcome != runner.Succeeded {
		t.Fatalf("release 1, held, after the undeploy: %+v", rep)
	}
	done()
	if b.Modules() != 1 {
		t.Fatalf("%d modules with one hold left, want 1", b.Modules())
	}
	again()
	if b.Modules() != 0 {
		t.Fatalf("%d modules with nothing deployed or held", b.Modules())
	}
	if rep := runOn(t, b, d, a); rep.Outcome != runner.PlatformFailure {
		t.Fatalf("release 1 with no hold and no deployment: %+v", rep)
	}
}

// TestACompileWhoseDeployEndedStopsEvenOnOneProcessor: wazero checks the
// context between functions only when it compiles on more than one
// worker, so the backend uses two at least, however many processors Go
// runs on. With GOMAXPROCS at 1, a deploy of many functions that each
// take a while to compile, whose context ends early, returns long before
// the compile would have ended (measured in the same test: the bound is
// half of it, where the expected is a small fraction).
func TestACompileWhoseDeployEndedStopsEvenOnOneProcessor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	functions := make([][]byte, guest.MaxBlockWork/(1024*1024)/2)
	for i := range functions {
		// A block of 1,023 br_ifs in a row: 1,024 blocks and branches.
		functions[i] = body(noLocals, concat([]byte{0x02, 0x40}, repeat(1023, 0x41, 0x00, 0x0d, 0x00), []byte{0x0b})...)
	}
	m := guestModule{bodies: functions}.bytes()
	d := deployment("acme", "slow", map[string][]byte{"slow": m})
	b, _ := ownBackend(t, guest.Config{}, m)
	began := time.Now()
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	whole := time.Since(began)
	b.Undeploy("acme", "slow")

	abandoned, _ := ownBackend(t, guest.Config{}, m)
	ctx, cancel := context.WithTimeout(context.Background(), whole/20)
	defer cancel()
	began = time.Now()
	_, err := abandoned.Prepare(ctx, d)
	took := time.Since(began)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Prepare: %v, want the context's deadline", err)
	}
	t.Logf("the whole compile: %v; abandoned at %v, Prepare returned after %v", whole, whole/20, took)
	if took > whole/2 {
		t.Fatalf("Prepare returned after %v, the whole compile took %v: the compile did not stop", took, whole)
	}
}
