package trace

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkReaderWindow reads 200,000 release lines that reached the
// file out of order: every block of 64 reversed, and every 10,000th
// order missing (a gap, so the window fills before the reader moves
// on). It is the reorder window's cost: each line is pushed on the
// heap and popped. ns/op is one line.
func BenchmarkReaderWindow(b *testing.B) {
	const n, block, gapEvery = 200_000, 64, 10_000
	var sb strings.Builder
	sb.WriteString(header(0) + "\n")
	for start := uint64(1); start <= n; start += block {
		for o := min(start+block-1, n); o >= start; o-- {
			if o%gapEvery != 0 {
				sb.WriteString(release(o) + "\n")
			}
		}
	}
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	lines := 0
	for lines < b.N {
		r, err := Open([]string{path}, DefaultWindow)
		if err != nil {
			b.Fatal(err)
		}
		for lines < b.N {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			lines++
		}
		_ = r.Close()
	}
}
