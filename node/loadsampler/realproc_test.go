package loadsampler_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/loadsampler"
)

// On this machine's /proc (and cgroup, whichever version it has), the
// sampler reads PSI and publishes valid samples.
func TestRealProcPublishes(t *testing.T) {
	if _, err := os.Stat("/proc/pressure/cpu"); err != nil {
		t.Skipf("this kernel offers no PSI (/proc/pressure/cpu: %v); TestRealProcFallbacksPublish covers the fallbacks", err)
	}
	state := core.NewNodeLoadState(2*time.Second, nil)
	s, err := loadsampler.New(loadsampler.Config{Target: state, MaximumObservationAge: 2 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Sample(); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cur, ok := state.CurrentLoad()
	if !ok || cur.Sequence != 3 {
		t.Fatalf("current %+v, want the third sample", cur)
	}
	if src := s.Sources(); src.CPU != loadsampler.CPUPSI {
		t.Errorf("sources %+v, want CPU from PSI", src)
	}
	t.Logf("real /proc: cpu %.3f memory %.3f from %s/%s", cur.CPUPressure, cur.MemoryPressure, s.Sources().CPU, s.Sources().Memory)
	one, err := loadsampler.ReadOnce(loadsampler.Files{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one-shot: %+v", one)
}

// Without PSI the real loadavg and meminfo still give a sample: a proc
// directory holding only those two files, linked to the real ones.
func TestRealProcFallbacksPublish(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"loadavg", "meminfo"} {
		if _, err := os.Stat(filepath.Join("/proc", name)); err != nil {
			t.Skipf("no /proc/%s on this system: %v", name, err)
		}
		if err := os.Symlink(filepath.Join("/proc", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	state := core.NewNodeLoadState(2*time.Second, nil)
	s, err := loadsampler.New(loadsampler.Config{Files: loadsampler.Files{Proc: dir}, Target: state, MaximumObservationAge: 2 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sample(); err != nil {
		t.Fatal(err)
	}
	if _, ok := state.CurrentLoad(); !ok {
		t.Fatal("nothing published")
	}
	if src := s.Sources(); src != (loadsampler.Sources{CPU: loadsampler.CPULoadavg, Memory: loadsampler.MemoryMeminfo}) {
		t.Errorf("sources %+v, want loadavg and meminfo", src)
	}
}
