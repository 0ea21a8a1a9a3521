package guest_test

import (
	"context"
	"testing"

	"latent.dev/admission/node/cellpool"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/runner/synthetic"
	"latent.dev/admission/policy"
)

// BenchmarkInvocation is one activation end to end on the runner:
// admission, a cell, the backend's run and the release. The synthetic
// backend is the baseline; the difference is what running a real guest
// costs (instantiation, memory, WASI, _start, close).
//
//	cd edge && go test -run '^$' -bench Invocation -benchtime 2s ./guest
func BenchmarkInvocation(b *testing.B) {
	for _, bc := range []struct {
		name    string
		backend runner.Backend
		route   string
		input   string
	}{
		{"backend=synthetic", synthetic.New(nil), "trap", ""},
		{"backend=wasm/guest=hand-assembled-return", shared.backend, "ret", ""},
		{"backend=wasm/guest=go-uppercase", shared.backend, "upper", "hello, guest"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := newNode(b, guestsDeployment())
			pool, err := cellpool.New(cellpool.ConfigFromPolicy(n.provider.Policy()))
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			r, err := runner.New(runner.Config{Backends: map[string]runner.Backend{"wasm": bc.backend}})
			if err != nil {
				b.Fatal(err)
			}
			a := ask{route: bc.route, input: bc.input, fuel: roomyFuel, memory: 32 << 20}
			input := []byte(bc.input)
			b.ReportAllocs()
			for b.Loop() {
				permit, err := n.controller.Admit(n.request(b, "acme", "guests", a))
				if err != nil {
					b.Fatal(err)
				}
				lease, err := pool.Acquire(policy.Small)
				if err != nil {
					b.Fatal(err)
				}
				exec, err := permit.StartExecution()
				if err != nil {
					b.Fatal(err)
				}
				act := r.NewActivation(input)
				act.Run(context.Background(), exec, lease)
				if rep, _ := act.Wait(context.Background()); rep.Outcome != runner.Succeeded && bc.route != "trap" {
					b.Fatalf("outcome %v", rep.Outcome)
				}
			}
		})
	}
}
