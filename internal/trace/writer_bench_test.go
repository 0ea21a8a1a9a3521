package trace_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/internal/trace"
)

// BenchmarkRotation is one line per file (MaxBytes 1): each op is a
// flush, an fsync, a close, a rename and an open, the cost of one
// rotation on this file system.
func BenchmarkRotation(b *testing.B) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, MaxBytes: 1, Buffer: b.N + 1, BufferBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		w.Add(decision(uint64(i + 1)))
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if w.Dropped() != 0 {
		b.Fatalf("%d dropped", w.Dropped())
	}
}

var route1000 = strings.Repeat("r", 1000)

// BenchmarkCloseAFullQueue is what a shutdown waits for when the queue
// is full: the queue filled to its bytes (DefaultBufferBytes) while the
// disk hung, then Close, rotating every 1 MiB (latentd's least
// -record-max-bytes). Its ns/op is one whole Close.
func BenchmarkCloseAFullQueue(b *testing.B) {
	for range b.N {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "trace.jsonl")
		var stalled atomic.Bool
		release := make(chan struct{})
		w, err := trace.NewWriter(trace.WriterConfig{Path: path, MaxBytes: 1 << 20, Create: func(p string) (trace.File, error) {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			return stalledFile{File: f, stalled: &stalled, release: release}, err
		}})
		if err != nil {
			b.Fatal(err)
		}
		stalled.Store(true)
		// Lines with a 1,000-byte route, so the bytes bind first.
		for i := uint64(1); ; i++ {
			l := decision(i)
			l.Decision.Target.Route = route1000
			if !w.Add(l) {
				break
			}
		}
		queued := w.QueuedBytes()
		b.StartTimer()
		start := time.Now()
		stalled.Store(false)
		close(release)
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(queued)/(1<<20), "queued-MiB")
		b.ReportMetric(time.Since(start).Seconds(), "close-s")
		b.StartTimer()
	}
}
