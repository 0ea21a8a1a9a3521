package trace

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBuffer is the number of lines a [Writer] buffers by default.
const DefaultBuffer = 65536

// DefaultBufferBytes bounds, by default, the memory the lines waiting in
// a [Writer]'s queue hold (as [Line.QueuedBytes] counts it).
const DefaultBufferBytes = 64 << 20

// flushEvery bounds how long a written line may wait in the file buffer.
const flushEvery = 100 * time.Millisecond

// RetryEvery is how often a [Writer] whose writes fail tries again.
const RetryEvery = time.Second

// File is what a [Writer] writes a trace file through; *os.File is one.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
}

// createFile creates, or truncates, path for writing.
func createFile(path string) (File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}

// WriterConfig configures a [Writer].
type WriterConfig struct {
	// Path is the trace file. It is created, or truncated: a new
	// recording replaces the file.
	Path string
	// MaxBytes, when positive, rotates the trace once the current file
	// has reached it: Path is renamed Path.1 (replacing an older Path.1)
	// and a new Path begins, with a header whose File is one more. 0 is
	// no rotation. A file may exceed MaxBytes by the line that reached it.
	MaxBytes int64
	// Buffer is how many lines may wait to be written; 0 is
	// DefaultBuffer. A line added while it is full is dropped.
	Buffer int
	// BufferBytes bounds the bytes the waiting lines hold
	// ([Line.QueuedBytes]); 0 is DefaultBufferBytes. A line that would
	// take the queue past it is dropped, unless the queue is empty (so
	// that one line larger than the bound still goes through).
	BufferBytes int64
	// StartUnixNano and PolicySHA256 go in every header.
	StartUnixNano int64
	PolicySHA256  string
	// NextOrder, when set, gives a dropped line its Order (the node's
	// provider.NextOrder); otherwise a dropped line has Order 0.
	NextOrder func() uint64
	// Logger, when set, is told when a write fails (once, when the
	// recording stops) and when writing succeeds again.
	Logger *slog.Logger
	// Recycle, when set, is called on the writing goroutine with the
	// Owner of every line the writer took from its queue, once it has
	// written (or dropped) it: the line's parts are no longer read, and
	// the owner may reuse them. A line Add refuses is not handed back.
	Recycle func(owner any)
	// Create opens Path for writing, created or truncated; nil is
	// os.OpenFile. It is the file system's seam for tests.
	Create func(path string) (File, error)
}

// Writer writes a trace file: [Writer.Add] queues a line without ever
// blocking, and one goroutine encodes the queued lines, one JSON object a
// line ([AppendLine]), into the file. Lines that find the queue full are dropped and
// counted, and a [KindDropped] line in the file says how many, so that a
// reader knows the trace is not exact.
//
// A write that fails (a full disk) stops the recording: the failure is
// logged and counted ([Writer.Failures], [Writer.Err]), the lines since
// the last successful flush and every line until writing succeeds again
// are dropped (and counted), and every [RetryEvery] the writer cuts the
// file back to its last complete line and tries again. When a try
// succeeds, a dropped line says how many were lost and recording goes on
// in the same file.
//
// # The queue
//
// The queue is a ring of cfg.Buffer slots under mu: Add copies its line
// into the next free slot, and the writing goroutine takes every queued
// line at once, reads them outside the lock (a slot is the writer's from
// the moment it is counted until the writer frees it) and frees them
// under the lock, releaseEvery at a time. A line being written still
// counts against the queue's bounds until it is freed. The writer is
// never woken for each line: once it has written what it found it naps
// for up to napFor while lines gather, and only when it finds nothing
// does it sleep until an Add wakes it (wakeAt).
type Writer struct {
	cfg      WriterConfig
	dropped  atomic.Uint64
	failures atomic.Uint64
	stopped  atomic.Pointer[error]
	wake     chan struct{} // an Add wakes the sleeping writer (capacity 1)
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once

	// The queue's fields, which every Add writes, have cache lines of
	// their own: the writing goroutine's fields change with every line
	// it writes, and sharing a line with them cost each Add a transfer
	// between cores (BenchmarkAdmitRecording at -cpu 2).
	_  [falseSharingBytes]byte
	mu sync.Mutex
	// ring holds the queued lines, from head, count of them; slots
	// outside that range are zero. Guarded by mu, except that the
	// writing goroutine reads and clears the slots it took.
	ring   []slot
	head   int   // guarded by mu
	count  int   // guarded by mu
	queued int64 // guarded by mu: the queued lines' QueuedBytes
	closed bool  // guarded by mu
	// wakeAt and wakeBytes, while wakeAt is positive, say the writer
	// sleeps until the queue holds wakeAt lines or wakeBytes bytes; the
	// Add that gets there sets wakeAt to 0 and wakes it. Guarded by mu.
	wakeAt    int
	wakeBytes int64
	_         [falseSharingBytes]byte

	written atomic.Uint64 // counted by the writing goroutine, line by line

	// Owned by the writing goroutine (and NewWriter before it starts).
	f         File
	bw        *bufio.Writer
	line      []byte // the line being encoded (AppendLine), reused
	fragments fragments
	size      int64  // bytes given to bw since the file began
	synced    int64  // size at the last successful flush: a line boundary
	unflushed uint64 // lines counted written since the last successful flush
	file      uint64
	reported  uint64 // dropped lines already written in a dropped line
	// reportedSynced is reported at the last successful flush.
	reportedSynced uint64
	failing        error // the write error the recording stopped on; nil while writing
	rename         bool  // failing between closing a full file and renaming it
	lastTry        time.Time
	finalError     error // what Close returns
}

// falseSharingBytes keeps fields apart: two cache lines, as amd64's
// adjacent-line prefetcher pairs them.
const falseSharingBytes = 128

// slot is a queued line and its QueuedBytes. A line queued by
// [Writer.AddMove] keeps its move here, in the ring itself, and points
// at it: a move is a few words, and copying it costs less than the
// allocation or the pool that would keep it alive elsewhere.
type slot struct {
	line  Line
	bytes int64
	move  Move
}

// NewWriter creates (or truncates) cfg.Path, writes its header and starts
// the goroutine that writes what [Writer.Add] queues. [Writer.Close]
// stops it.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Path == "" {
		return nil, errors.New("trace: a path is required")
	}
	if cfg.MaxBytes < 0 {
		return nil, errors.New("trace: MaxBytes must not be negative")
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.Create == nil {
		cfg.Create = createFile
	}
	w := &Writer{cfg: cfg, ring: make([]slot, cfg.Buffer),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w.bw = bufio.NewWriterSize(nil, 64<<10)
	if err := w.open(); err != nil {
		return nil, w.pathError(err)
	}
	if err := w.bw.Flush(); err != nil {
		_ = w.f.Close()
		return nil, w.pathError(err)
	}
	w.synced = w.size
	go w.run()
	return w, nil
}

// QueuedBytes is what l holds while it waits in a [Writer]'s queue, as
// the queue's byte bound counts it: its strings and slices and a fixed
// part for the structs.
func (l *Line) QueuedBytes() int64 {
	n := int64(256) + int64(len(l.Kind))
	if l.Header != nil {
		n += int64(len(l.Header.PolicySHA256))
	}
	if l.Catalog != nil {
		n += int64(len(l.Catalog.File))
	}
	if c := l.Change; c != nil {
		n += int64(len(c.Deployment) + len(c.Tenant) + len(c.Service))
	}
	if l.Load != nil {
		n += 8 * int64(len(l.Load.QueueDelayNS))
	}
	if d := l.Decision; d != nil {
		n += 256 + int64(len(d.Stage)+len(d.Target.Tenant)+len(d.Target.Service)+len(d.Target.Route)+
			len(d.RoutingKey)+len(d.ActivationID)+len(d.Answer)+len(d.Scope)+len(d.Dimension)) + 8*int64(len(d.Since))
		if p := d.Principal; p != nil {
			n += int64(len(p.Kind) + len(p.Subject) + len(p.Tenant) + len(p.Service))
		}
		if r := d.Revision; r != nil {
			n += int64(len(r.Tenant) + len(r.Service) + len(r.Route) + len(r.Contract) + len(r.Function) + len(r.Revision) + len(r.Release))
		}
	}
	return n
}

// Add queues line to be written. It never blocks: when the queue is full
// (in lines or in bytes), or the writer is closed, the line is dropped
// (and counted when the queue was full) and Add returns false. The line's
// parts must not be changed after Add; when it returns false they are
// the caller's again (its Owner is not handed to WriterConfig.Recycle).
func (w *Writer) Add(line Line) bool { return w.add(&line, nil) }

// AddWait queues line, waiting while the queue is full: for the lines of
// the catalog a recording starts with, which may be far more than the
// queue's bytes. False when the writer is closed.
func (w *Writer) AddWait(line Line) bool {
	for {
		switch w.tryAdd(&line, nil) {
		case added:
			return true
		case closed:
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// AddMove queues a start or release line (kind) whose move is m, as Add
// queues a line: it never blocks, and a line that finds the queue full is
// dropped, counted, and AddMove returns false. m is copied into the
// queue, so the caller keeps nothing for the writer to hand back.
func (w *Writer) AddMove(kind string, order uint64, t int64, m Move) bool {
	return w.add(&Line{Kind: kind, Order: order, T: t}, &m)
}

// add is Add and AddMove: tryAdd, counting a line the full queue drops.
func (w *Writer) add(line *Line, move *Move) bool {
	switch w.tryAdd(line, move) {
	case added:
		return true
	case full:
		w.dropped.Add(1)
	}
	return false
}

type addResult int

const (
	added addResult = iota
	full
	closed
)

// tryAdd queues line; when move is not nil, the line's move is a copy of
// it kept in the line's slot.
func (w *Writer) tryAdd(line *Line, move *Move) addResult {
	n := line.QueuedBytes()
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return closed
	}
	if w.count == len(w.ring) || w.queued > 0 && w.queued+n > w.cfg.BufferBytes {
		w.mu.Unlock()
		return full
	}
	i := w.head + w.count
	if i >= len(w.ring) {
		i -= len(w.ring)
	}
	s := &w.ring[i]
	s.line, s.bytes = *line, n
	if move != nil {
		s.move = *move
		s.line.Move = &s.move
	}
	w.count++
	w.queued += n
	wake := w.wakeAt > 0 && (w.count >= w.wakeAt || w.queued >= w.wakeBytes)
	if wake {
		w.wakeAt = 0
	}
	w.mu.Unlock()
	if wake {
		select {
		case w.wake <- struct{}{}:
		default: // a wake is already pending
		}
	}
	return added
}

// Dropped is the number of lines dropped because the queue was full (or,
// after a write error, could not be written).
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written is the number of added lines written to the file (headers and
// dropped lines are not counted).
func (w *Writer) Written() uint64 { return w.written.Load() }

// Failures is the number of times the recording stopped on a write error.
func (w *Writer) Failures() uint64 { return w.failures.Load() }

// QueuedBytes is what the lines waiting in the queue hold.
func (w *Writer) QueuedBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued
}

// Err is the write error the recording is stopped on (it names the
// file), or nil while the recording is being written.
func (w *Writer) Err() error {
	if p := w.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// Close writes what is queued, a final dropped line if lines were dropped
// since the last one, syncs and closes the file, and stops the goroutine.
// Lines added concurrently with Close may be lost; Add after Close
// returns false. It returns the write error the recording was stopped on
// when it closed, if it was, or the error closing the file met. It may be
// called more than once.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.stop)
	})
	<-w.done
	return w.finalError
}
