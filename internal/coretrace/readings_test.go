package coretrace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"latent.dev/admission/core"
	"latent.dev/admission/internal/trace"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// steppingClock moves by a millisecond after every reading, as a node's
// clock moves while a decision runs.
type steppingClock struct{ now time.Time }

func (c *steppingClock) Now() time.Time {
	t := c.now
	c.now = c.now.Add(time.Millisecond)
	return t
}

func (c *steppingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// nextSample hands out a new sample at every reading.
type nextSample struct{ seq uint64 }

func (s *nextSample) CurrentLoad() (*core.LoadSample, bool) {
	s.seq++
	return &core.LoadSample{Sequence: s.seq}, true
}

// samples finds a sample by its sequence; Latest is sequence 99.
type samples struct{}

func (samples) BySequence(seq uint64) (*core.LoadSample, bool) {
	if seq == 0 {
		return nil, false
	}
	return &core.LoadSample{Sequence: seq}, true
}

func (samples) Latest() (*core.LoadSample, bool) { return &core.LoadSample{Sequence: 99}, true }

// read asks in for every label, each of them n times and in an order
// unlike the decision's, and returns the last answer of each.
func read(in core.Inputs, first time.Time, n int) (step12, commit time.Duration, load, commitLoad uint64) {
	for range n {
		commit = in.CommitSince(first)
		if s, ok := in.CommitLoad(); ok {
			commitLoad = s.Sequence
		}
		step12 = in.Step12Since(first)
		if s, ok := in.Step12Load(); ok {
			load = s.Sequence
		}
	}
	return step12, commit, load, commitLoad
}

// A decision that reads a label more than once is recorded with the
// last reading of each label, and the replay answers each label with
// its own reading however many times, and in whatever order, it is
// asked: a replay does not count reads.
func TestAReplayAnswersEachLabelHoweverOftenItIsAsked(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clock := &steppingClock{now: start.Add(time.Second)}
	var rec Recording
	rec.Reset(clock, &nextSample{})
	first := rec.First() // at 1s; the clock is at 1s+1ms
	rec.Step12Load()
	rec.Step12Load() // sample 2 is step 12's
	rec.Step12Since(first)
	assert.Equal(t, 2*time.Millisecond, rec.Step12Since(first), "the last step-12 reading")
	rec.CommitSince(first)
	assert.Equal(t, 4*time.Millisecond, rec.CommitSince(first), "the last commit reading")
	rec.CommitLoad()
	rec.CommitLoad() // sample 4 is the commit's
	rec.CommitFleet(core.FleetReading{Published: true, Slice: 3, Remaining: time.Second, Writes: 2})
	rec.Placed(17, true)

	var d trace.Decision
	order, tt, clocked := rec.Put(&d, start)
	assert.Equal(t, uint64(17), order)
	assert.True(t, clocked)
	assert.Equal(t, int64(time.Second), tt)
	assert.Equal(t, trace.Decision{Clock: true, Committed: true, Since: []int64{int64(2 * time.Millisecond), int64(4 * time.Millisecond)},
		LoadSequence: 2, CommitLoadSequence: 4, Fleet: &trace.FleetReading{Published: true, Slice: 3, RemainingNS: int64(time.Second), Writes: 2}}, d)

	var in Replaying
	in.Set(&d, At(start.UnixNano(), tt), samples{})
	assert.True(t, in.First().Equal(first))
	for _, n := range []int{1, 2, 5} {
		step12, commit, load, commitLoad := read(&in, first, n)
		assert.Equal(t, 2*time.Millisecond, step12, "step 12, read %d times", n)
		assert.Equal(t, 4*time.Millisecond, commit, "the commit, read %d times", n)
		assert.Equal(t, uint64(2), load, "step 12's sample, read %d times", n)
		assert.Equal(t, uint64(4), commitLoad, "the commit's sample, read %d times", n)
	}
}

// The line's readings, by label: a committed decision's last reading is
// the commit's; a label the recorded decision did not reach answers the
// latest reading before it.
func TestReplayingReadsTheLineByLabel(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	for _, tc := range []struct {
		name                string
		d                   trace.Decision
		step12, commit      time.Duration
		load, commitLoad    uint64
		loadOK, commitLoadK bool
	}{
		{"committed, no resample", trace.Decision{Clock: true, Committed: true, Since: []int64{ms(2)}, LoadSequence: 1, CommitLoadSequence: 1},
			0, 2 * time.Millisecond, 1, 1, true, true},
		{"committed, resampled", trace.Decision{Clock: true, Committed: true, Since: []int64{ms(1), ms(2)}, LoadSequence: 1, CommitLoadSequence: 2},
			time.Millisecond, 2 * time.Millisecond, 1, 2, true, true},
		{"refused at step 12 after a resample", trace.Decision{Clock: true, Since: []int64{ms(1)}, LoadSequence: 3},
			time.Millisecond, time.Millisecond, 3, 3, true, true},
		{"refused at step 12 without a sample", trace.Decision{Clock: true},
			0, 0, 0, 0, false, false},
		{"refused before the clock", trace.Decision{},
			0, 0, 99, 99, true, true},
		{"a hostile line: too many readings", trace.Decision{Clock: true, Committed: true, Since: []int64{ms(1), ms(7), ms(3)}},
			time.Millisecond, 3 * time.Millisecond, 0, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in Replaying
			in.Set(&tc.d, time.Unix(5, 0), samples{})
			require.True(t, in.First().Equal(time.Unix(5, 0)))
			assert.Equal(t, tc.step12, in.Step12Since(time.Time{}))
			assert.Equal(t, tc.commit, in.CommitSince(time.Time{}))
			s, ok := in.Step12Load()
			assert.Equal(t, tc.loadOK, ok)
			if ok {
				assert.Equal(t, tc.load, s.Sequence)
			}
			s, ok = in.CommitLoad()
			assert.Equal(t, tc.commitLoadK, ok)
			if ok {
				assert.Equal(t, tc.commitLoad, s.Sequence)
			}
		})
	}
}

// A decision that read nothing writes no reading, and a reused
// Recording forgets the last decision's.
func TestARecordingResetForgetsTheLastDecision(t *testing.T) {
	var rec Recording
	rec.Reset(&steppingClock{now: time.Unix(9, 0)}, &nextSample{})
	first := rec.First()
	rec.Step12Load()
	rec.CommitSince(first)
	rec.CommitFleet(core.FleetReading{})
	rec.Placed(3, true)
	rec.Reset(&steppingClock{now: time.Unix(9, 0)}, nil)
	rec.Placed(4, false)
	d := trace.Decision{Since: []int64{1}, LoadSequence: 8, Fleet: &trace.FleetReading{}}
	order, _, clocked := rec.Put(&d, time.Unix(0, 0))
	assert.Equal(t, uint64(4), order)
	assert.False(t, clocked)
	assert.Equal(t, trace.Decision{}, d)
	s, ok := rec.Step12Load()
	assert.False(t, ok, "no load source")
	assert.Nil(t, s)
}
