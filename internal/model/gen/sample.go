package gen

import (
	"math"
	"time"

	"pgregory.net/rapid"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// Sample draws a load sample at now for a node with policy p whose last
// accepted sample had sequence and was observed at last: usually a good one, and
// sometimes one wrong in one of the ways a sampler can get it wrong.
func Sample(t *rapid.T, p *policy.NodeAdmissionPolicy, now time.Time, sequence uint64, last time.Time) core.LoadSample {
	observed := now.Add(-Pick(t, []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, time.Second}, "publish.age"))
	if observed.Before(last) {
		observed = last // observations never go back
	}
	s := core.LoadSample{
		Sequence:       sequence + Pick(t, []uint64{1, 2}, "publish.sequence_step"),
		ObservedAt:     observed,
		CPUPressure:    Pick(t, []float64{0, 0.3, 0.49}, "publish.cpu"),
		MemoryPressure: Pick(t, []float64{0, 0.3, 0.49}, "publish.memory"),
	}
	if Chance(t, 1, 3, "publish.delay") {
		s.QueueDelay[Int(t, 0, policy.NumCellClasses-1, "publish.delay.class")] = Pick(t,
			[]time.Duration{10 * time.Millisecond, 300 * time.Millisecond, time.Hour, math.MaxInt64}, "publish.delay.value")
	}
	if Chance(t, 1, 4, "publish.odd") {
		switch PickFlat(t, []string{"cpu-nan", "memory-nan", "cpu-negative", "memory-above-one", "cpu-infinite",
			"cpu-at-threshold", "memory-at-threshold", "cpu-one", "negative-delay", "same-sequence", "older-sequence",
			"older-observation", "future-dated", "just-future", "stale", "just-stale"}, "publish.how") {
		case "cpu-nan":
			s.CPUPressure = math.NaN()
		case "memory-nan":
			s.MemoryPressure = math.NaN()
		case "cpu-negative":
			s.CPUPressure = -0.1
		case "memory-above-one":
			s.MemoryPressure = 1.0000001
		case "cpu-infinite":
			s.CPUPressure = math.Inf(1)
		case "cpu-at-threshold":
			s.CPUPressure = p.Node.Overload.CPUThreshold
		case "memory-at-threshold":
			s.MemoryPressure = p.Node.Overload.MemoryThreshold
		case "cpu-one":
			s.CPUPressure = 1
		case "negative-delay":
			s.QueueDelay[Int(t, 0, policy.NumCellClasses-1, "publish.delay.class")] = -time.Nanosecond
		case "same-sequence":
			s.Sequence = sequence
		case "older-sequence":
			s.Sequence = sequence - min(sequence, 1)
		case "older-observation":
			s.ObservedAt = last.Add(-time.Nanosecond)
		case "future-dated":
			s.ObservedAt = now.Add(time.Second)
		case "just-future":
			s.ObservedAt = now.Add(time.Nanosecond)
		case "stale":
			s.ObservedAt = now.Add(-p.Node.Overload.MaximumObservationAge - time.Second)
		case "just-stale":
			s.ObservedAt = now.Add(-p.Node.Overload.MaximumObservationAge - time.Nanosecond)
		}
	}
	return s
}

// Millis is s as a sampler measuring whole milliseconds would publish it,
// sometimes with a delay that is negative or that no time.Duration holds.
func Millis(t *rapid.T, s core.LoadSample) core.LoadSampleMillis {
	ms := core.LoadSampleMillis{Sequence: s.Sequence, ObservedAtUnixMillis: s.ObservedAt.UnixMilli(),
		CPUPressure: s.CPUPressure, MemoryPressure: s.MemoryPressure}
	for i, d := range s.QueueDelay {
		ms.QueueDelayMillis[i] = d.Milliseconds()
	}
	if Chance(t, 1, 4, "publish.millis.odd") {
		ms.QueueDelayMillis[Int(t, 0, policy.NumCellClasses-1, "publish.millis.class")] = Pick(t,
			[]int64{math.MaxInt64 / int64(time.Millisecond), math.MaxInt64/int64(time.Millisecond) + 1, math.MaxInt64, -1}, "publish.millis.delay")
	}
	return ms
}
