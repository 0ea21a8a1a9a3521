package latentd_test

import (
	"context"
	"testing"
	"time"

	"latent.dev/admission/edge/latentd"
)

func TestSoakIsBoundedByCountAndTime(t *testing.T) {
	for _, o := range []latentd.SoakOptions{{Duration: time.Second, Concurrency: 1}, {Requests: 1, Concurrency: 1}, {Requests: 1, Duration: time.Second}} {
		if _, err := latentd.Soak(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	r, err := latentd.Soak(context.Background(), latentd.SoakOptions{Requests: 40, Duration: time.Minute, Concurrency: 2})
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
