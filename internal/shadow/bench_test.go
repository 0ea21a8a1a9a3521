package shadow

import (
	"path/filepath"
	"sync"
	"testing"

	"latent.dev/admission/internal/shadow/shadowtest"
)

var benchTrace struct {
	once sync.Once
	path string
	err  error
}

// BenchmarkReplay replays a generated trace of 100,000 decisions (with
// their starts and releases and a load sample every 1000) under the
// policy it was recorded with; decisions/s counts both passes.
func BenchmarkReplay(b *testing.B) {
	p := loadPolicy(b)
	benchTrace.once.Do(func() {
		rec, err := shadowtest.NewRecorder(p, catalogJSON(b))
		if err != nil {
			benchTrace.err = err
			return
		}
		if benchTrace.err = (shadowtest.Workload{Decisions: 100_000, SampleEvery: 1000, Seed: 9}).Run(rec); benchTrace.err != nil {
			return
		}
		dir, err := filepathTemp()
		if err != nil {
			benchTrace.err = err
			return
		}
		benchTrace.path = filepath.Join(dir, "bench.jsonl")
		benchTrace.err = rec.Write(benchTrace.path)
	})
	if benchTrace.err != nil {
		b.Fatal(benchTrace.err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var decisions uint64
	for b.Loop() {
		res, err := Replay(Config{Policy: p, Files: []string{benchTrace.path}, Window: benchWindow})
		if err != nil {
			b.Fatal(err)
		}
		if res.Changed != 0 {
			b.Fatalf("%d changed", res.Changed)
		}
		decisions += res.Decisions
	}
	b.ReportMetric(float64(decisions)/b.Elapsed().Seconds(), "decisions/s")
}

var benchWindow = 0
