package soak_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/edge/soak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSoakIsBoundedByCountAndTime(t *testing.T) {
	for _, o := range []soak.Options{{Duration: time.Second, Concurrency: 1}, {Requests: 1, Concurrency: 1}, {Requests: 1, Duration: time.Second}} {
		if _, err := soak.Run(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	r, err := soak.Run(context.Background(), soak.Options{Requests: 40, Duration: time.Minute, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 40 || r.Answered()+r.Errors != r.Sent || len(r.Latencies) != r.Answered() || len(r.Violations) > 0 {
		t.Fatalf("%+v\n%s", r, r)
	}
	if r.Percentile(0) > r.Percentile(0.5) || r.Percentile(0.5) > r.Percentile(1) {
		t.Errorf("percentiles out of order:\n%s", r)
	}
}

// The mix reaches every answer it is made of, and the node's invariants
// hold after it.
func TestTheMixGetsEveryStatus(t *testing.T) {
	r, err := soak.Run(context.Background(), soak.Options{Requests: 300, Duration: 2 * time.Minute, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.String())
	if len(r.Violations) > 0 {
		t.Fatal(r.Violations)
	}
	for _, status := range []int{200, 401, 403, 404, 413} {
		if r.Statuses[status] == 0 {
			t.Errorf("no %d answers in the mix: %v", status, r.Statuses)
		}
	}
	if r.Sent != 300 {
		t.Errorf("sent %d, want 300", r.Sent)
	}
}
