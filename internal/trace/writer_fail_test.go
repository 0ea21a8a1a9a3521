package trace_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"latent.dev/admission/internal/trace"
)

// patience bounds every wait on a condition.
const patience = 2 * time.Minute

// fullDisk is a file-system seam: while full, a write puts down half of
// its bytes and fails with ENOSPC, as a write to a full disk can.
type fullDisk struct {
	full   atomic.Bool
	writes atomic.Int64 // writes that failed
}

type diskFile struct {
	*os.File
	disk *fullDisk
}

func (d *fullDisk) create(path string) (trace.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	return diskFile{File: f, disk: d}, nil
}

func (f diskFile) Write(p []byte) (int, error) {
	if f.disk.full.Load() {
		f.disk.writes.Add(1)
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

// syncBuffer is a log destination safe for the writer's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWriterLogsAFullDiskAndResumesWhenSpaceReturns(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	disk := &fullDisk{}
	var log syncBuffer
	var orders atomic.Uint64
	orders.Store(1 << 20)
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Create: disk.create,
		Logger:    slog.New(slog.NewJSONHandler(&log, nil)),
		NextOrder: func() uint64 { return orders.Add(1) }})
	require.NoError(t, err)

	var next uint64
	route := "run"
	sent := map[uint64]string{} // order -> the route its line was sent with
	add := func(n int) {
		for range n {
			next++
			l := decision(next)
			l.Decision.Target.Route = route
			sent[next] = route
			require.True(t, w.Add(l))
		}
	}
	add(10)
	require.Eventually(t, func() bool { return w.Written() == 10 }, patience, time.Millisecond)
	// The line flushed; the disk fills.
	disk.full.Store(true)
	// The lines that will be lost have a part of their own, which the
	// lines after the failure repeat: they must not name it in "same",
	// since the file no longer has it.
	route = "lost"
	// Enough lines to fill the file buffer: a write reaches the disk.
	for disk.writes.Load() == 0 {
		add(100)
		time.Sleep(10 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return w.Err() != nil }, patience, time.Millisecond)
	assert.Contains(t, w.Err().Error(), path, "the error names the file")
	assert.ErrorIs(t, w.Err(), syscall.ENOSPC)
	assert.EqualValues(t, 1, w.Failures())
	// Logged when it happened, with the file.
	require.Eventually(t, func() bool { return strings.Contains(log.String(), "recording stopped") }, patience, time.Millisecond)
	assert.Contains(t, log.String(), `"file":"`+path+`"`)
	assert.Contains(t, log.String(), "no space left on device")
	failedAt := next

	// Space returns: the writer cuts the torn line off and goes on.
	disk.full.Store(false)
	require.Eventually(t, func() bool { return w.Err() == nil }, patience, 10*time.Millisecond)
	assert.Contains(t, log.String(), "recording resumed")
	add(5)
	require.NoError(t, w.Close())
	assert.EqualValues(t, 1, w.Failures())

	// The file reads cleanly: every line decodes, the lost ones are
	// counted in a dropped line, and the lines after the failure are
	// there.
	lines := readLines(t, path)
	var decisions, reported uint64
	var last uint64
	for _, l := range lines[1:] {
		switch l.Kind {
		case trace.KindDecision:
			decisions++
			last = l.Order
		case trace.KindDropped:
			reported += l.Lines
		}
	}
	assert.Equal(t, next, last, "the lines after the failure are written")
	assert.Greater(t, next, failedAt)
	assert.Equal(t, next, decisions+reported, "every line is written or counted dropped")
	assert.Equal(t, w.Dropped(), reported)
	assert.Equal(t, decisions, w.Written())
	assert.NotZero(t, reported)

	// Read as a recording, every decision has the parts it was sent with.
	var read uint64
	for _, l := range readRecording(t, path) {
		if l.Kind == trace.KindDecision {
			read++
			want := decision(l.Order).Decision
			want.Target.Route = sent[l.Order]
			assert.Equal(t, *want, *l.Decision, "order %d", l.Order)
		}
	}
	assert.Equal(t, decisions, read)
}

func TestWriterStillStoppedAtCloseReturnsTheError(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	disk := &fullDisk{}
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, Create: disk.create})
	require.NoError(t, err)
	disk.full.Store(true)
	require.True(t, w.Add(decision(1)))
	err = w.Close()
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.True(t, strings.HasPrefix(err.Error(), "trace: "+path+": "), "%v", err)
	assert.EqualValues(t, 1, w.Dropped())
	assert.Zero(t, w.Written())
}

// stalledFile's writes block while stalled: a writer that cannot keep
// up (a disk that hangs).
type stalledFile struct {
	*os.File
	stalled *atomic.Bool
	release chan struct{}
}

func (f stalledFile) Write(p []byte) (int, error) {
	if f.stalled.Load() {
		<-f.release
	}
	return f.File.Write(p)
}

func TestTheWritersQueueIsBoundedInBytes(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	var stalled atomic.Bool
	release := make(chan struct{})
	const bound = 1 << 20
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, BufferBytes: bound, Create: func(p string) (trace.File, error) {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		return stalledFile{File: f, stalled: &stalled, release: release}, err
	}})
	require.NoError(t, err)
	stalled.Store(true)
	// Lines with a 100 KB name, far more than the bound: an attacker's
	// strings while the disk hangs. The queue has room for 65,536 lines,
	// but only for about ten of these.
	big := decision(1)
	big.Decision.Target.Tenant = strings.Repeat("t", 100<<10)
	size := big.QueuedBytes()
	var accepted int
	for i := range 200 {
		l := big
		l.Order = uint64(i + 1)
		if w.Add(l) {
			accepted++
		}
		assert.LessOrEqual(t, w.QueuedBytes(), int64(bound)+size)
	}
	assert.LessOrEqual(t, accepted, bound/int(size)+2, "at most the bound, and the line being written")
	assert.GreaterOrEqual(t, accepted, bound/int(size)-1)
	assert.EqualValues(t, 200-accepted, w.Dropped())
	stalled.Store(false)
	close(release)
	require.NoError(t, w.Close())
	assert.Zero(t, w.QueuedBytes())
	assert.EqualValues(t, accepted, w.Written())
}

func TestALineLargerThanTheByteBoundGoesThroughAnEmptyQueue(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, BufferBytes: 1024})
	require.NoError(t, err)
	big := decision(1)
	big.Decision.Target.Tenant = strings.Repeat("t", 4096)
	require.True(t, w.Add(big))
	require.NoError(t, w.Close())
	assert.EqualValues(t, 1, w.Written())
}

func TestAFileBegunOnAFullDiskGetsItsHeaderOnRetry(t *testing.T) {
	defer goleak.VerifyNone(t)
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	disk := &fullDisk{}
	var created atomic.Int32
	one := decision(1)
	// The disk fills as the rotation begins the second file.
	w, err := trace.NewWriter(trace.WriterConfig{Path: path, MaxBytes: 1, Create: func(p string) (trace.File, error) {
		if created.Add(1) == 2 {
			disk.full.Store(true)
		}
		return disk.create(p)
	}})
	require.NoError(t, err)
	require.True(t, w.Add(one))
	require.Eventually(t, func() bool { return w.Err() != nil }, patience, time.Millisecond)
	disk.full.Store(false)
	require.Eventually(t, func() bool { return w.Err() == nil }, patience, 10*time.Millisecond)
	require.NoError(t, w.Close())
	older, newer := readLines(t, path+".1"), readLines(t, path)
	require.Len(t, older, 2)
	assert.EqualValues(t, 1, older[1].Order)
	require.NotEmpty(t, newer)
	require.Equal(t, trace.KindHeader, newer[0].Kind, "the new file begins with its header")
	assert.EqualValues(t, 1, newer[0].Header.File)
}
