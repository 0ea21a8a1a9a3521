package deadline

import (
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var est = Estimate{EstimatedServiceTime: 100 * time.Millisecond, MinimumExecutionTime: 20 * time.Millisecond, SafetyMargin: 10 * time.Millisecond}

func TestCheck(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name      string
		remaining time.Duration
		backlog   uint64
		p         uint64
		observed  time.Duration
		e         Estimate
		want      Verdict
	}{
		{"remaining equal to required is infeasible", 30 * ms, 0, 4, 0, est, InfeasibleEmpty},
		{"remaining just above required is feasible", 30*ms + 1, 0, 4, 0, est, Feasible},
		{"backlog below parallelism adds no wait", 31 * ms, 3, 4, 0, est, Feasible},
		{"a full wave adds one service time", 130 * ms, 4, 4, 0, est, Infeasible},
		{"floor of backlog over parallelism", 131 * ms, 7, 4, 0, est, Feasible},
		{"observed delay dominates when larger", 230 * ms, 4, 4, 200 * ms, est, Infeasible},
		{"local wait dominates when larger", 131 * ms, 4, 4, 50 * ms, est, Feasible},
		{"observed delay with an empty backlog is retryable", 40 * ms, 0, 4, 10 * ms, est, Infeasible},
		{"negative remaining is infeasible", -ms, 0, 4, 0, est, InfeasibleEmpty},
		{"multiplication overflow rejects", time.Duration(math.MaxInt64), math.MaxUint64, 1, 0, est, Overflow},
		{"addition overflow rejects", time.Duration(math.MaxInt64), 0, 1, time.Duration(math.MaxInt64), est, Overflow},
		{"zero parallelism rejects", time.Hour, 0, 0, 0, est, Overflow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.remaining, tc.backlog, tc.p, tc.observed, tc.e); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBind(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	if got := Bind(now, 5*time.Second, 0, false); !got.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("without caller deadline: %v", got)
	}
	if got := Bind(now, 5*time.Second, 1_002_000, true); !got.Equal(time.UnixMilli(1_002_000)) {
		t.Fatalf("caller deadline shortens: %v", got)
	}
	if got := Bind(now, 5*time.Second, 1_009_000, true); !got.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("caller deadline never lengthens: %v", got)
	}
	if got := Bind(now, 5*time.Second, math.MaxInt64, true); !got.Equal(now.Add(5 * time.Second)) {
		t.Fatalf("far-future caller deadline: %v", got)
	}
	if got := Bind(now, 5*time.Second, math.MinInt64, true); !got.Before(now) {
		t.Fatalf("far-past caller deadline: %v", got)
	}
}

func TestExpired(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	if !Expired(now, 1_000_000) {
		t.Fatal("equality is expired")
	}
	if Expired(now, 1_000_001) {
		t.Fatal("one millisecond later is not expired")
	}
	if !Expired(now.Add(time.Nanosecond), 1_000_000) {
		t.Fatal("a deadline passed by a nanosecond is expired")
	}
}

type backwards struct{ t time.Time }

func (b backwards) Now() time.Time                { return b.t }
func (b backwards) Since(time.Time) time.Duration { return -time.Second }

func TestResampleNeverGoesBackwards(t *testing.T) {
	first := time.UnixMilli(5000)
	if got := Resample(backwards{first}, first); !got.Equal(first) {
		t.Fatalf("got %v", got)
	}
	if got := Resample(System{}, time.Now()); got.IsZero() {
		t.Fatal("system resample")
	}
}
