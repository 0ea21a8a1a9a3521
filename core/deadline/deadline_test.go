package deadline

import (
	"math"
	"math/big"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var est = Estimate{EstimatedServiceTime: 100 * time.Millisecond, MinimumExecutionTime: 20 * time.Millisecond, SafetyMargin: 10 * time.Millisecond}

func TestCheck(t *testing.T) {
	ms := time.Millisecond
	const largest = time.Duration(math.MaxInt64)
	// The most waves of est's service time that fit in a Duration.
	maxWaves := uint64(math.MaxInt64 / int64(est.EstimatedServiceTime))
	zeroService := Estimate{MinimumExecutionTime: 20 * ms, SafetyMargin: 10 * ms}
	zeroFloor := Estimate{EstimatedServiceTime: 100 * ms}
	nanoService := Estimate{EstimatedServiceTime: 1, MinimumExecutionTime: 20 * ms, SafetyMargin: 10 * ms}
	cases := []struct {
		name      string
		remaining time.Duration
		backlog   uint64
		p         uint64
		observed  time.Duration
		e         Estimate
		want      Verdict
	}{
		{"remaining equal to required is infeasible", 30 * ms, 0, 4, 0, est, InfeasibleAlways},
		{"remaining just above required is feasible", 30*ms + 1, 0, 4, 0, est, Feasible},
		{"backlog below parallelism adds no wait", 31 * ms, 3, 4, 0, est, Feasible},
		{"a full wave adds one service time", 130 * ms, 4, 4, 0, est, Infeasible},
		{"a full wave just met is feasible", 130*ms + 1, 4, 4, 0, est, Feasible},
		{"floor of backlog over parallelism", 131 * ms, 7, 4, 0, est, Feasible},
		{"two waves", 230 * ms, 8, 4, 0, est, Infeasible},
		{"observed delay dominates when larger", 230 * ms, 4, 4, 200 * ms, est, Infeasible},
		{"observed delay just met is feasible", 230*ms + 1, 4, 4, 200 * ms, est, Feasible},
		{"local wait dominates when larger", 131 * ms, 4, 4, 50 * ms, est, Feasible},
		{"local wait just met is infeasible when it dominates", 130 * ms, 4, 4, 50 * ms, est, Infeasible},
		{"observed delay with an empty backlog is retryable", 40 * ms, 0, 4, 10 * ms, est, Infeasible},

		// Retryability: refused even with no wait at all, or not.
		{"remaining at minimum execution plus safety margin with a backlog is never feasible", 30 * ms, 3, 4, 0, est, InfeasibleAlways},
		{"remaining at minimum execution plus safety margin behind full waves is never feasible", 30 * ms, 400, 4, 0, est, InfeasibleAlways},
		{"remaining at minimum execution plus safety margin with observed delay is never feasible", 30 * ms, 0, 4, 10 * ms, est, InfeasibleAlways},
		{"remaining below minimum execution plus safety margin is never feasible", 29 * ms, 0, 4, 0, est, InfeasibleAlways},
		{"remaining just above minimum execution plus safety margin behind a wave is retryable", 30*ms + 1, 4, 4, 0, est, Infeasible},
		{"remaining just above minimum execution plus safety margin behind observed delay is retryable", 30*ms + 1, 0, 4, 1 * ms, est, Infeasible},
		{"negative remaining is never feasible", -ms, 0, 4, 0, est, InfeasibleAlways},
		{"negative remaining with a backlog is never feasible", -ms, 40, 4, 10 * ms, est, InfeasibleAlways},
		{"zero remaining with no minimum and no margin is never feasible", 0, 4, 4, 0, zeroFloor, InfeasibleAlways},
		{"any remaining with no minimum and no margin is feasible with no wait", 1, 3, 4, 0, zeroFloor, Feasible},
		{"any remaining with no minimum and no margin behind a wave is retryable", 1, 4, 4, 0, zeroFloor, Infeasible},

		// Zero inputs are in range (only negative ones are not).
		{"zero observed delay is in range", 31 * ms, 0, 1, 0, est, Feasible},
		{"zero service time adds no wait to any backlog", 30*ms + 1, math.MaxUint64, 1, 0, zeroService, Feasible},
		{"zero service time with a backlog is never feasible at the floor", 30 * ms, math.MaxUint64, 1, 0, zeroService, InfeasibleAlways},
		{"zero minimum execution is in range", 10*ms + 1, 0, 1, 0, Estimate{EstimatedServiceTime: 100 * ms, SafetyMargin: 10 * ms}, Feasible},
		{"zero safety margin is in range", 20*ms + 1, 0, 1, 0, Estimate{EstimatedServiceTime: 100 * ms, MinimumExecutionTime: 20 * ms}, Feasible},
		{"parallelism of one", 130*ms + 1, 1, 1, 0, est, Feasible},

		// Overflow of the local wait: waves * estimated_service.
		{"the most waves that fit are feasible with all the time there is", largest, maxWaves, 1, 0, est, Feasible},
		{"one wave more than fits overflows", largest, maxWaves + 1, 1, 0, est, Overflow},
		{"the most waves that fit, spread over parallelism", largest, 3*maxWaves + 2, 3, 0, est, Feasible},
		{"one wave more than fits, spread over parallelism", largest, 3 * (maxWaves + 1), 3, 0, est, Overflow},
		{"a backlog far above what fits overflows", largest, maxWaves << 8, 1, 0, est, Overflow},
		{"multiplication overflow rejects", largest, math.MaxUint64, 1, 0, est, Overflow},
		{"a one-nanosecond service time fits the largest backlog a Duration holds", largest, math.MaxInt64 - uint64(30*ms), 1, 0, nanoService, Infeasible},
		{"a one-nanosecond service time overflows just above it", largest, math.MaxInt64 - uint64(30*ms) + 1, 1, 0, nanoService, Overflow},
		{"a one-nanosecond service time overflows above the largest Duration", largest, math.MaxInt64 + 1, 1, 0, nanoService, Overflow},

		// Overflow of the additions.
		{"required of exactly the largest Duration is infeasible, not overflow", largest, 0, 1, largest - 30*ms, est, Infeasible},
		{"required one above the largest Duration overflows", largest, 0, 1, largest - 30*ms + 1, est, Overflow},
		{"addition overflow rejects", largest, 0, 1, largest, est, Overflow},
		{"minimum plus margin of exactly the largest Duration is never feasible, not overflow", largest, 0, 1, 0,
			Estimate{MinimumExecutionTime: largest - 10*ms, SafetyMargin: 10 * ms}, InfeasibleAlways},
		{"minimum plus margin one above the largest Duration overflows", largest, 0, 1, 0,
			Estimate{MinimumExecutionTime: largest - 10*ms + 1, SafetyMargin: 10 * ms}, Overflow},
		{"minimum plus margin overflow wins over an early answer", -ms, 0, 1, 0,
			Estimate{MinimumExecutionTime: largest, SafetyMargin: largest}, Overflow},

		// Inputs no policy can hold.
		{"zero parallelism rejects", time.Hour, 0, 0, 0, est, Overflow},
		{"negative observed delay rejects", time.Hour, 0, 1, -1, est, Overflow},
		{"negative service time rejects", time.Hour, 0, 1, 0, Estimate{EstimatedServiceTime: -1}, Overflow},
		{"negative minimum execution rejects", time.Hour, 0, 1, 0, Estimate{MinimumExecutionTime: -1, SafetyMargin: 10 * ms}, Overflow},
		{"negative safety margin rejects", time.Hour, 0, 1, 0, Estimate{MinimumExecutionTime: 20 * ms, SafetyMargin: -1}, Overflow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(tc.remaining, tc.backlog, tc.p, tc.observed, tc.e); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// The verdict agrees with the rule written out in big-integer arithmetic,
// which cannot overflow, over inputs around every boundary.
func TestCheckMatchesExactArithmetic(t *testing.T) {
	const largest = math.MaxInt64
	durations := []time.Duration{0, 1, 10 * time.Millisecond, 30 * time.Millisecond, largest / 3, largest/2 - 1, largest / 2, largest - 1, largest}
	remainings := append([]time.Duration{-1, math.MinInt64}, durations...)
	backlogs := []uint64{0, 1, 2, 3, 4, 7, largest / 2, largest - 1, largest, largest + 1, math.MaxUint64}
	for _, remaining := range remainings {
		for _, backlog := range backlogs {
			for _, p := range []uint64{1, 2, 3} {
				for _, observed := range durations {
					for _, service := range durations {
						for _, minimum := range durations {
							for _, margin := range []time.Duration{0, 1, largest / 2, largest} {
								e := Estimate{service, minimum, margin}
								got, want := Check(remaining, backlog, p, observed, e), exactCheck(remaining, backlog, p, observed, e)
								if got != want {
									t.Fatalf("Check(%d, %d, %d, %d, %+v) = %v, exact arithmetic says %v", remaining, backlog, p, observed, e, got, want)
								}
							}
						}
					}
				}
			}
		}
	}
}

// exactCheck is the feasibility rule in arbitrary precision: overflow is
// any intermediate above the largest Duration.
func exactCheck(remaining time.Duration, backlog, p uint64, observed time.Duration, e Estimate) Verdict {
	largest := big.NewInt(math.MaxInt64)
	least := new(big.Int).Add(big.NewInt(int64(e.MinimumExecutionTime)), big.NewInt(int64(e.SafetyMargin)))
	localWait := new(big.Int).Mul(new(big.Int).SetUint64(backlog/p), big.NewInt(int64(e.EstimatedServiceTime)))
	wait := localWait
	if o := big.NewInt(int64(observed)); o.Cmp(wait) > 0 {
		wait = o
	}
	required := new(big.Int).Add(wait, least)
	if least.Cmp(largest) > 0 || localWait.Cmp(largest) > 0 || required.Cmp(largest) > 0 {
		return Overflow
	}
	r := big.NewInt(int64(remaining))
	switch {
	case r.Cmp(required) > 0:
		return Feasible
	case r.Cmp(least) <= 0:
		return InfeasibleAlways
	}
	return Infeasible
}

func TestShortenAndUntilCaller(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	const grant = 5 * time.Second
	cases := []struct {
		name   string
		caller int64
		want   time.Duration
	}{
		{"an earlier caller deadline shortens it", 1_002_000, 2 * time.Second},
		{"a caller deadline at the grant keeps it", 1_005_000, grant},
		{"a later caller deadline never lengthens it", 1_009_000, grant},
		{"a far-future caller deadline keeps it", math.MaxInt64, grant},
		{"a far-past caller deadline leaves nothing", math.MinInt64, math.MinInt64},
	}
	for _, tc := range cases {
		if got := Shorten(grant, UntilCaller(now, tc.caller)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := UntilCaller(now, 1_000_000); got != 0 {
		t.Errorf("a deadline at now leaves %v, want 0 (passed)", got)
	}
	if got := UntilCaller(now.Add(time.Nanosecond), 1_000_000); got != -time.Nanosecond {
		t.Errorf("a deadline passed by a nanosecond leaves %v", got)
	}
	if got := UntilCaller(now, 1_000_001); got != time.Millisecond {
		t.Errorf("a deadline a millisecond away leaves %v", got)
	}
}

func TestHasMonotonic(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		t    time.Time
		want bool
	}{
		{now, true},
		{now.Add(time.Hour), true},
		{now.Round(0), false},
		{time.UnixMilli(1767225600000), false},
		{time.Time{}, false},
	} {
		if got := HasMonotonic(tc.t); got != tc.want {
			t.Errorf("HasMonotonic(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}
