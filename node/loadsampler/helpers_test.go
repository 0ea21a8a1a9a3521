package loadsampler_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/node/loadsampler"
)

// manualClock reads a time the test sets; it never moves by itself.
type manualClock struct{ now atomic.Int64 }

func newManualClock(t time.Time) *manualClock {
	c := &manualClock{}
	c.set(t)
	return c
}

func (c *manualClock) set(t time.Time)                 { c.now.Store(t.UnixNano()) }
func (c *manualClock) Now() time.Time                  { return time.Unix(0, c.now.Load()) }
func (c *manualClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// copyFixture copies testdata/name into a temporary directory the test
// may change, and returns its Files.
func copyFixture(t *testing.T, name string) (loadsampler.Files, string) {
	t.Helper()
	src := filepath.Join("testdata", name)
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return loadsampler.Files{Proc: filepath.Join(dst, "proc"), CgroupRoot: filepath.Join(dst, "cgroup"), CPUs: 4}, dst
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// recorder is a Target that keeps every sample, or refuses with err.
type recorder struct {
	mu      sync.Mutex
	samples []core.LoadSample
	err     error
}

func (r *recorder) Publish(s core.LoadSample) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.samples = append(r.samples, s)
	return nil
}

func (r *recorder) last(t *testing.T) core.LoadSample {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		t.Fatal("nothing published")
	}
	return r.samples[len(r.samples)-1]
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines that contain substr.
func (b *logBuffer) lines(substr string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for line := range strings.Lines(b.buf.String()) {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}
