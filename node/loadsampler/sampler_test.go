package loadsampler_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/core"
	"latent.dev/admission/node/internal/nodetest"
	"latent.dev/admission/node/loadsampler"
	"latent.dev/admission/policy"
)

var quiet = slog.New(slog.DiscardHandler)

// The first sample is one-shot (avg10); later ones are Δtotal / Δwall
// over the interval, clamped, and fall back to avg10 when the clock did
// not move or a total went backwards. Sequences count publishes from 1;
// ObservedAt and the queue delays come from the one clock reading taken
// with the files.
func TestSamplesDifferencePSITotalsOverTheInterval(t *testing.T) {
	files, dir := copyFixture(t, "psi-nocgroup")
	t0 := time.Unix(1_700_000_000, 0)
	clock := newManualClock(t0)
	target := &recorder{}
	var delayAt time.Time
	delays := func(now time.Time) [policy.NumCellClasses]time.Duration {
		delayAt = now
		return [policy.NumCellClasses]time.Duration{policy.Small: 3 * time.Millisecond}
	}
	s, err := loadsampler.New(loadsampler.Config{Files: files, Target: target, MaximumObservationAge: 2 * time.Second,
		QueueDelay: delays, Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	cpuFile, memFile := filepath.Join(dir, "proc/pressure/cpu"), filepath.Join(dir, "proc/pressure/memory")
	psiLine := func(avg10, total string) string {
		return "some avg10=" + avg10 + " avg60=0.00 avg300=0.00 total=" + total + "\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
	}
	steps := []struct {
		rule        string
		advance     time.Duration
		cpu, memory string // new totals, or "" to leave the file
		wantCPU     float64
		wantMemory  float64
	}{
		{"the first sample is one-shot: avg10", 0, "", "", 0.42, 0.2},
		{"a quarter second of CPU stall and a tenth of memory stall in one second", time.Second, "1250000", "600000", 0.25, 0.1},
		{"a clock that did not move falls back to avg10", 0, "1300000", "600000", 0.42, 0.2},
		{"a total that went backwards falls back to avg10", time.Second, "5", "5", 0.42, 0.2},
		{"more stall than wall time is clamped to 1", time.Second, "2000005", "5", 1, 0},
	}
	now := t0
	for i, step := range steps {
		now = now.Add(step.advance)
		clock.set(now)
		if step.cpu != "" {
			writeFile(t, cpuFile, psiLine("42.00", step.cpu))
			writeFile(t, memFile, psiLine("20.00", step.memory))
		}
		if err := s.Sample(); err != nil {
			t.Fatalf("%s: %v", step.rule, err)
		}
		got := target.last(t)
		if got.CPUPressure != step.wantCPU || got.MemoryPressure != step.wantMemory {
			t.Errorf("%s: cpu %v memory %v, want %v %v", step.rule, got.CPUPressure, got.MemoryPressure, step.wantCPU, step.wantMemory)
		}
		if got.Sequence != uint64(i+1) || !got.ObservedAt.Equal(now) || !delayAt.Equal(now) {
			t.Errorf("%s: sequence %d observed %v delays at %v, want %d and %v", step.rule, got.Sequence, got.ObservedAt, delayAt, i+1, now)
		}
		if got.QueueDelay[policy.Small] != 3*time.Millisecond {
			t.Errorf("%s: queue delay %v, want the scheduler's", step.rule, got.QueueDelay)
		}
	}
	if st := s.Stats(); st != (loadsampler.Stats{Published: uint64(len(steps))}) {
		t.Errorf("stats %+v", st)
	}
}

// A sampler whose reads start failing publishes nothing, so admission
// turns load-unavailable once the last sample is older than the maximum
// observation age; it recovers at the next good read. The failure is
// logged once, not once per tick, and so is the recovery.
func TestFailingReadsFailAdmissionClosedAndRecover(t *testing.T) {
	const maxAge = 2 * time.Second
	node := nodetest.New(t, func(p *policy.NodeAdmissionPolicy) { p.Node.Overload.MaximumObservationAge = maxAge })
	t0 := time.Now()
	clock := newManualClock(t0)
	state := core.NewNodeLoadState(maxAge, clock)
	controller := node.Provider.Controller(core.ControllerConfig{Source: node.Source, Load: state, Clock: clock})
	files, dir := copyFixture(t, "psi-cgroup2-psi-larger")
	logs := &logBuffer{}
	s, err := loadsampler.New(loadsampler.Config{Files: files, Target: state, MaximumObservationAge: maxAge, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	admit := func(at time.Duration) error {
		clock.set(t0.Add(at))
		p, err := controller.Admit(nodetest.Request(nodetest.Ask{}))
		if err == nil {
			p.Release()
		}
		return err
	}
	loadUnavailable := func(err error) bool {
		var e core.Error
		return errors.As(err, &e) && e.Reason() == core.ReasonLoadUnavailable
	}
	sampleAt := func(at time.Duration) error {
		clock.set(t0.Add(at))
		return s.Sample()
	}

	if err := sampleAt(0); err != nil {
		t.Fatal(err)
	}
	if err := admit(100 * time.Millisecond); err != nil {
		t.Fatalf("with a fresh sample: %v", err)
	}
	// memory.current becomes a directory: reading it fails, even as root.
	current := filepath.Join(dir, "cgroup/job.slice/memory.current")
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(current, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2500 * time.Millisecond} {
		var fe *loadsampler.FileError
		if err := sampleAt(at); !errors.As(err, &fe) || fe.Path != current {
			t.Fatalf("sample at %v: %v, want a FileError naming %s", at, err, current)
		}
	}
	if err := admit(maxAge); err != nil {
		t.Fatalf("the last good sample is exactly the maximum age old: %v", err)
	}
	if err := admit(maxAge + time.Millisecond); !loadUnavailable(err) {
		t.Fatalf("past the maximum age: %v, want load-unavailable", err)
	}
	if n := len(logs.lines("load sample failed")); n != 1 {
		t.Errorf("four failed reads logged %d times, want once:\n%s", n, logs.lines(""))
	}
	if err := os.Remove(current); err != nil {
		t.Fatal(err)
	}
	writeFile(t, current, "102400000\n")
	if err := sampleAt(3 * time.Second); err != nil {
		t.Fatalf("after the file came back: %v", err)
	}
	if err := admit(3*time.Second + time.Millisecond); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if err := sampleAt(3500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.lines("load sampling recovered")); n != 1 {
		t.Errorf("recovery logged %d times, want once", n)
	}
	if st := s.Stats(); st != (loadsampler.Stats{Published: 3, Failures: 4}) {
		t.Errorf("stats %+v, want 3 published and 4 failures", st)
	}
	if cur, ok := state.CurrentLoad(); !ok || cur.Sequence != 3 {
		t.Errorf("current sample %+v, want sequence 3: failures publish nothing and use no sequence", cur)
	}
}

// A sample the target refuses is counted and logged once per change, like
// a failed read.
func TestRefusedPublishesAreCounted(t *testing.T) {
	files, _ := copyFixture(t, "psi-nocgroup")
	target := &recorder{err: core.ErrLoadSampleRejected}
	logs := &logBuffer{}
	s, err := loadsampler.New(loadsampler.Config{Files: files, Target: target, Interval: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Sample(); !errors.Is(err, core.ErrLoadSampleRejected) {
			t.Fatalf("Sample = %v, want the target's refusal", err)
		}
	}
	if st := s.Stats(); st != (loadsampler.Stats{Rejected: 3}) {
		t.Errorf("stats %+v, want 3 rejected", st)
	}
	if n := len(logs.lines("load sample failed")); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
}

// Run samples at once and on every tick, and returns when its context
// ends, leaving no goroutine or timer behind.
func TestRunStopsWithItsContext(t *testing.T) {
	files, _ := copyFixture(t, "psi-cgroup1")
	state := core.NewNodeLoadState(time.Minute, nil)
	s, err := loadsampler.New(loadsampler.Config{Files: files, Target: state, Interval: 2 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	nodetest.Eventually(t, time.Minute, "three publishes", func() bool { return s.Stats().Published >= 3 })
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute): // only a hang: a loaded machine is slow
		t.Fatal("Run did not return after its context ended")
	}
	goleak.VerifyNone(t)
	cur, ok := state.CurrentLoad()
	if !ok || cur.Sequence < 3 || cur.MemoryPressure != 0.5 {
		t.Errorf("current %+v, want sequence >= 3 and the cgroup v1 ratio 0.5", cur)
	}
}

func TestIntervalDefaultsToAQuarterOfTheMaximumAge(t *testing.T) {
	files, _ := copyFixture(t, "psi-nocgroup")
	s, err := loadsampler.New(loadsampler.Config{Files: files, Target: &recorder{}, MaximumObservationAge: 2 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Interval(); got != 500*time.Millisecond {
		t.Errorf("interval %v, want 500ms", got)
	}
}

func TestNewRefusesWhatItCannotRun(t *testing.T) {
	files, _ := copyFixture(t, "psi-nocgroup")
	for _, c := range []struct {
		name string
		cfg  loadsampler.Config
	}{
		{"no target", loadsampler.Config{Files: files, Interval: time.Second}},
		{"neither interval nor maximum age", loadsampler.Config{Files: files, Target: &recorder{}}},
		{"a negative interval", loadsampler.Config{Files: files, Target: &recorder{}, Interval: -time.Second}},
	} {
		if _, err := loadsampler.New(c.cfg); !errors.Is(err, loadsampler.ErrInvalidConfig) {
			t.Errorf("%s: %v, want ErrInvalidConfig", c.name, err)
		}
	}
	bad := fixture("malformed-psi-total")
	var fe *loadsampler.FileError
	if _, err := loadsampler.New(loadsampler.Config{Files: bad, Target: &recorder{}, Interval: time.Second, Logger: quiet}); !errors.As(err, &fe) {
		t.Errorf("a malformed source at startup: %v, want a FileError", err)
	}
}
