package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestShortSoakHoldsEveryInvariant(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-duration", "1500ms", "-workers", "4", "-seed", "7"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	for _, want := range []string{"t=  1s admitted=", "admit latency p50", "peak live reservations", "ok   ledger back to zero",
		"ok   every abandoned permit reclaimed", "capacity-exhausted", "principal-not-authorized", "revision-not-available"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "FAIL") {
		t.Errorf("an invariant failed:\n%s", text)
	}
}

func TestBadFlagsAndFiles(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-duration", "0s"}, &out, &errOut); code != 2 {
		t.Fatalf("zero duration: exit %d", code)
	}
	if code := run([]string{"-policy", "/nonexistent"}, &out, &errOut); code != 2 {
		t.Fatalf("missing policy: exit %d", code)
	}
	if code := run([]string{"-catalog", "../../testdata/policy/node.json"}, &out, &errOut); code != 2 {
		t.Fatalf("a policy as catalog: exit %d", code)
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.13 {
			t.Errorf("q%.2f = %v, want within 12.5%% above %v", c.q, got, c.want)
		}
	}
}

func TestShortPipelineSoakHoldsEveryInvariant(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-pipeline", "-duration", "1200ms", "-workers", "4", "-seed", "3"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	for _, want := range []string{"pipeline soak:", "ran ", "ok   ledger, scheduler and pool counters back at baseline",
		"ok   no cell ran two guests", "ok   no permit leaked"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

func TestShortHTTPSoakHoldsEveryInvariant(t *testing.T) {
	cfg := config{http: true, duration: 2 * time.Second, requests: 1 << 30, workers: 4}
	r, err := soakHTTP(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r.print(&out)
	text := out.String()
	t.Log(text)
	if r.soak.Sent == 0 || r.soak.Answered()+r.soak.Errors != r.soak.Sent {
		t.Errorf("sent %d, answered %d, transport errors %d", r.soak.Sent, r.soak.Answered(), r.soak.Errors)
	}
	for _, status := range []int{200, 401, 403, 404, 413} {
		if r.soak.Statuses[status] == 0 {
			t.Errorf("no %d answers in the mix: %v", status, r.soak.Statuses)
		}
	}
	if !r.ok() || strings.Contains(text, "FAIL") {
		t.Errorf("an invariant failed:\n%s", text)
	}
	for _, want := range []string{"http soak:", "200 OK", "latency: p50", "ok   ledger back to zero", "ok   every request answered", "goroutines "} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

func TestHTTPSoakStopsAtTheRequestCount(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"-http", "-requests", "150", "-duration", "1m", "-workers", "3"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "soak: 150 requests in ") {
		t.Errorf("not 150 requests:\n%s", out.String())
	}
	for _, bad := range [][]string{{"-http", "-pipeline"}, {"-http", "-report", "x.html"}, {"-http", "-requests", "0"}, {"-http", "-load", "psi"}} {
		if code := run(bad, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}
