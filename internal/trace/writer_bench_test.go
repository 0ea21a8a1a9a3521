package trace_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"latent.dev/admission/internal/cputime"
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

// recordedDecision is a decision line as latentd's recorder makes one
// for an admitted request (a principal, a resolved revision, one reading
// after the first), about 600 bytes encoded.
func recordedDecision(order uint64) trace.Line {
	wall := int64(5e9)
	return trace.Line{Kind: trace.KindDecision, Order: order, T: int64(order) * 1000, Decision: &trace.Decision{Stage: trace.StageCore,
		Principal: &trace.Principal{Kind: "user", Subject: "alice", Tenant: "acme"},
		Target:    trace.Target{Tenant: "acme", Service: "echo", Route: "run"},
		Revision: &trace.Revision{Tenant: "acme", Service: "echo", Route: "run", Contract: "echo-contract", Function: "echo",
			Revision: "r-2026-11-30T10:00:00Z", Release: "stable"},
		Generation: 3, ActivationID: "bench-activation", Priority: 5,
		Budget:       trace.Budget{CPUFuel: 1e9, MemoryBytes: 64 << 20, WallTimeNS: &wall},
		PayloadBytes: 1, Clock: true, Committed: true, Since: []int64{1234}, LoadSequence: 7, Answer: trace.AnswerAdmitted}}
}

// recordedLines are the lines of one admission as the recorder queues
// them: its decision and its release.
func recordedLines(order uint64) [2]trace.Line {
	return [2]trace.Line{recordedDecision(order),
		{Kind: trace.KindRelease, Order: order + 1, T: int64(order)*1000 + 5000, Move: &trace.Move{Of: order, ElapsedNS: 5000}}}
}

// BenchmarkWriter is the writer's cost per line, lines as the recorder
// queues them (a decision, then its release), written to a real file in
// a temporary directory.
//
// "through-file": one goroutine adds b.N lines, waiting for room when
// the queue is full (AddWait), then Close: ns/op is a line's time from
// Add to the file, lines/s the writer's throughput (at -cpu 1 the adding
// and the writing share the one core, so ns/op is their sum).
//
// cpu-ns is the process's CPU time (every goroutine's, the writer's
// too) per line, where the system measures it.
//
// "add": one goroutine adds b.N lines as fast as it can while the
// writer writes them: ns/op is what Add costs the goroutine that
// decides, and dropped/op the lines the writer could not keep up with.
func BenchmarkWriter(b *testing.B) {
	b.Run("through-file", func(b *testing.B) {
		w, path, lines := benchWriter(b)
		start := time.Now()
		cpu0, _ := cputime.Process()
		for i := range b.N {
			l := lines[i&1]
			l.Order = uint64(i + 1)
			w.AddWait(l)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		reportCPU(b, cpu0, "cpu-ns/line")
		if w.Dropped() != 0 {
			b.Fatalf("%d dropped", w.Dropped())
		}
		info, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(w.Written())/elapsed.Seconds(), "lines/s")
		b.ReportMetric(float64(info.Size())/float64(w.Written()), "bytes/line")
	})
	b.Run("add", func(b *testing.B) {
		w, _, lines := benchWriter(b)
		cpu0, _ := cputime.Process()
		for i := range b.N {
			l := lines[i&1]
			l.Order = uint64(i + 1)
			w.Add(l)
		}
		b.StopTimer()
		reportCPU(b, cpu0, "cpu-ns/op")
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(w.Dropped())/float64(b.N), "dropped/op")
	})
}

// benchWriter is a writer of a new trace file, the file's path and the
// lines recordedLines makes, with the benchmark's timer reset.
func benchWriter(b *testing.B) (*trace.Writer, string, [2]trace.Line) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	lines := recordedLines(1)
	b.ReportAllocs()
	b.ResetTimer()
	return w, path, lines
}

// reportCPU reports the CPU time used since cpu0 per op as unit.
func reportCPU(b *testing.B, cpu0 time.Duration, unit string) {
	if cpu1, ok := cputime.Process(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), unit)
	}
}
