package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBuffer is the number of lines a [Writer] buffers by default.
const DefaultBuffer = 65536

// flushEvery bounds how long a written line may wait in the file buffer.
const flushEvery = 100 * time.Millisecond

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
	// StartUnixNano and PolicySHA256 go in every header.
	StartUnixNano int64
	PolicySHA256  string
	// NextOrder, when set, gives a dropped line its Order (the node's
	// provider.NextOrder); otherwise a dropped line has Order 0.
	NextOrder func() uint64
}

// Writer writes a trace file: [Writer.Add] queues a line without ever
// blocking, and one goroutine encodes the queued lines, one JSON object a
// line, into the file. Lines that find the queue full are dropped and
// counted, and a [KindDropped] line in the file says how many, so that a
// reader knows the trace is not exact.
type Writer struct {
	cfg     WriterConfig
	lines   chan Line
	closed  atomic.Bool
	dropped atomic.Uint64
	written atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// Owned by the writing goroutine (and NewWriter before it starts).
	f        *os.File
	bw       *bufio.Writer
	enc      *json.Encoder
	buf      bytes.Buffer
	size     int64
	file     uint64
	reported uint64 // dropped lines already written in a dropped line
	err      error  // the first write error; after it nothing more is written
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
	w := &Writer{cfg: cfg, lines: make(chan Line, cfg.Buffer), stop: make(chan struct{}), done: make(chan struct{})}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	if err := w.open(); err != nil {
		return nil, err
	}
	go w.run()
	return w, nil
}

// Add queues line to be written. It never blocks: when the queue is full,
// or the writer is closed, the line is dropped (and counted when the
// queue was full) and Add returns false. The line's parts must not be
// changed after Add.
func (w *Writer) Add(line Line) bool {
	if w.closed.Load() {
		return false
	}
	select {
	case w.lines <- line:
		return true
	default:
		w.dropped.Add(1)
		return false
	}
}

// Dropped is the number of lines dropped because the queue was full (or,
// after a write error, could not be written).
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Written is the number of added lines written to the file (headers and
// dropped lines are not counted).
func (w *Writer) Written() uint64 { return w.written.Load() }

// Close writes what is queued, a final dropped line if lines were dropped
// since the last one, syncs and closes the file, and stops the goroutine.
// Lines added concurrently with Close may be lost; Add after Close
// returns false. It returns the first error the writer met. It may be
// called more than once.
func (w *Writer) Close() error {
	w.once.Do(func() {
		w.closed.Store(true)
		close(w.stop)
	})
	<-w.done
	return w.err
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case l := <-w.lines:
			w.write(&l)
			w.drain(tick.C)
			w.settle()
		case <-tick.C:
			w.settle()
		case <-w.stop:
			w.drain(nil)
			w.settle()
			w.finish()
			return
		}
	}
}

// drain writes queued lines until the queue is momentarily empty; while
// it does, a tick still flushes (and reports drops).
func (w *Writer) drain(tick <-chan time.Time) {
	for {
		select {
		case l := <-w.lines:
			w.write(&l)
		default:
			return
		}
		select {
		case <-tick:
			w.settle()
		default:
		}
	}
}

// settle writes a dropped line if lines were dropped since the last one,
// then flushes.
func (w *Writer) settle() {
	if d := w.dropped.Load(); d > w.reported {
		var order uint64
		if w.cfg.NextOrder != nil {
			order = w.cfg.NextOrder()
		}
		lines := d - w.reported
		w.reported = d
		w.put(&Line{Kind: KindDropped, Order: order, Dropped: &Dropped{Lines: lines}})
	}
	if w.err == nil {
		w.fail(w.bw.Flush())
	}
}

func (w *Writer) write(l *Line) {
	if w.put(l) {
		w.written.Add(1)
	} else {
		w.dropped.Add(1)
	}
}

// put encodes l into the file and rotates when the file has reached
// MaxBytes; false when it could not be written.
func (w *Writer) put(l *Line) bool {
	if w.err != nil {
		return false
	}
	w.buf.Reset()
	if err := w.enc.Encode(l); err != nil {
		// A line that cannot be encoded (a NaN pressure) is dropped.
		return false
	}
	n, err := w.bw.Write(w.buf.Bytes())
	w.size += int64(n)
	if w.fail(err) {
		return false
	}
	if w.cfg.MaxBytes > 0 && w.size >= w.cfg.MaxBytes {
		w.rotate()
	}
	return true
}

// fail records err if it is the first; it reports whether err != nil.
func (w *Writer) fail(err error) bool {
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("trace: %s: %w", w.cfg.Path, err)
	}
	return err != nil
}

// open creates the current file and writes its header.
func (w *Writer) open() error {
	f, err := os.OpenFile(w.cfg.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	w.f, w.size = f, 0
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 64<<10)
	} else {
		w.bw.Reset(f)
	}
	h := Line{Kind: KindHeader, Header: &Header{Version: Version, StartUnixNano: w.cfg.StartUnixNano, File: w.file, PolicySHA256: w.cfg.PolicySHA256}}
	w.buf.Reset()
	if err := w.enc.Encode(&h); err != nil {
		_ = f.Close()
		return fmt.Errorf("trace: %w", err)
	}
	n, err := w.bw.Write(w.buf.Bytes())
	w.size += int64(n)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("trace: %s: %w", w.cfg.Path, err)
	}
	return nil
}

// closeFile flushes, syncs and closes the current file.
func (w *Writer) closeFile() error {
	err := w.bw.Flush()
	if e := w.f.Sync(); err == nil {
		err = e
	}
	if e := w.f.Close(); err == nil {
		err = e
	}
	return err
}

// rotate ends the current file as Path.1 and starts the next.
func (w *Writer) rotate() {
	err := w.closeFile()
	w.f = nil
	if w.fail(err) {
		return
	}
	if w.fail(os.Rename(w.cfg.Path, w.cfg.Path+".1")) {
		return
	}
	w.file++
	if err := w.open(); err != nil && w.err == nil {
		w.err = err // names the path already
	}
}

// finish ends the last file.
func (w *Writer) finish() {
	if w.f == nil {
		return
	}
	err := w.closeFile()
	w.f = nil
	w.fail(err)
}
