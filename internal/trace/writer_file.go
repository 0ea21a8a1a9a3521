package trace

import (
	"fmt"
	"io"
	"os"
	"time"
)

// napFor is how long the writer waits, after writing what it found,
// for more lines to gather before it looks again: a line waits that much
// longer to reach the file buffer (never past flushEvery), and a writer
// that keeps up is woken at most once a napFor instead of once a line.
const napFor = time.Millisecond

// releaseEvery is how many written lines the writer frees in the queue
// at once (one lock).
const releaseEvery = 64

// run is the writing goroutine: it takes the queued lines, encodes and
// flushes them, stops on a failed write and retries, and rotates the
// files.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	nap := time.NewTimer(napFor)
	defer nap.Stop()
	// A napping writer is woken early once the queue holds a quarter of
	// its bounds.
	napLines, napBytes := max(1, len(w.ring)/4), max(1, w.cfg.BufferBytes/4)
	for {
		if w.drain() {
			w.settle()
			if !w.sleep(napLines, napBytes) {
				continue
			}
			nap.Reset(napFor)
			select {
			case <-w.wake:
			case <-nap.C:
			case <-tick.C:
				w.settle()
			case <-w.stop:
				w.end()
				return
			}
			continue
		}
		if !w.sleep(1, 1) {
			continue
		}
		select {
		case <-w.wake:
		case <-tick.C:
			w.settle()
		case <-w.stop:
			w.end()
			return
		}
	}
}

// sleep tells Add to wake the writer once the queue holds lines lines or
// bytes bytes; false when it already does (the writer goes on).
func (w *Writer) sleep(lines int, bytes int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.count >= lines || w.queued >= bytes {
		return false
	}
	w.wakeAt, w.wakeBytes = lines, bytes
	return true
}

// end writes what is queued when the writer is closed (Add takes no
// more), and ends the file.
func (w *Writer) end() {
	for w.drain() {
	}
	w.lastTry = time.Time{} // a stopped recording tries once more
	w.settle()
	w.finish()
}

// drain writes the lines queued when it begins, freeing their slots
// releaseEvery at a time; false when there were none.
func (w *Writer) drain() bool {
	w.mu.Lock()
	head, n := w.head, w.count
	w.wakeAt = 0 // awake
	w.mu.Unlock()
	if n == 0 {
		return false
	}
	for n > 0 {
		k := min(n, releaseEvery)
		var bytes int64
		for range k {
			s := &w.ring[head]
			bytes += s.bytes
			w.take(&s.line)
			*s = slot{} // the ring holds nothing of a written line
			if head++; head == len(w.ring) {
				head = 0
			}
		}
		w.mu.Lock()
		w.head = head
		w.count -= k
		w.queued -= bytes
		w.mu.Unlock()
		n -= k
	}
	return true
}

// take writes a line taken from the queue.
func (w *Writer) take(l *Line) {
	if w.put(l) {
		w.written.Add(1)
		w.unflushed++
	} else {
		w.dropped.Add(1)
	}
	if l.Owner != nil && w.cfg.Recycle != nil {
		w.cfg.Recycle(l.Owner)
	}
}

// settle retries a failed recording when it is time, writes a dropped
// line if lines were dropped since the last one, then flushes.
func (w *Writer) settle() {
	if w.failing != nil {
		if time.Since(w.lastTry) < RetryEvery {
			return
		}
		w.retry()
		if w.failing != nil {
			return
		}
	}
	if d := w.dropped.Load(); d > w.reported {
		var order uint64
		if w.cfg.NextOrder != nil {
			order = w.cfg.NextOrder()
		}
		if w.put(&Line{Kind: KindDropped, Order: order, Dropped: &Dropped{Lines: d - w.reported}}) {
			w.reported = d // until a failure cuts the line off again
		}
	}
	w.flush()
}

// flush writes out the file buffer; on success the file ends at a line
// boundary, which a later failure cuts the file back to.
func (w *Writer) flush() bool {
	if w.failing != nil {
		return false
	}
	if err := w.bw.Flush(); err != nil {
		w.fail(err)
		return false
	}
	w.synced, w.unflushed, w.reportedSynced = w.size, 0, w.reported
	return true
}

// inPlaceBytes is the room in the file buffer below which a line is
// encoded apart and copied in: more than a decision line takes.
const inPlaceBytes = 4 << 10

// put encodes l into the file and rotates when the file has reached
// MaxBytes; false when it could not be written.
func (w *Writer) put(l *Line) bool {
	if w.failing != nil {
		return false
	}
	// Encoded in place in the file buffer while it has room (bufio's
	// Write then copies nothing), else in w.line.
	inPlace := w.bw.Available() >= inPlaceBytes
	buf := w.line[:0]
	if inPlace {
		buf = w.bw.AvailableBuffer()
	}
	line, err := appendLine(buf, l, &w.fragments)
	if err != nil {
		// A line that cannot be encoded (a NaN pressure) is dropped, and
		// the parts it may have kept are forgotten.
		w.fragments.reset()
		return false
	}
	if !inPlace {
		w.line = line
	}
	n, err := w.bw.Write(line)
	w.size += int64(n)
	if err != nil {
		w.fail(err)
		return false
	}
	if w.cfg.MaxBytes > 0 && w.size >= w.cfg.MaxBytes {
		w.rotate()
	}
	return true
}

func (w *Writer) pathError(err error) error {
	return fmt.Errorf("trace: %s: %w", w.cfg.Path, err)
}

// fail stops the recording on err: the lines since the last successful
// flush are lost (counted dropped), and so is every line until a retry
// succeeds.
func (w *Writer) fail(err error) {
	if w.failing != nil {
		return
	}
	w.failing = w.pathError(err)
	w.lastTry = time.Now()
	w.failures.Add(1)
	// The lines since the last flush are lost: no later line may name
	// their parts in "same".
	w.fragments.reset()
	w.publishStopped()
	w.reported = w.reportedSynced
	if w.unflushed > 0 {
		w.written.Add(^(w.unflushed - 1))
		w.dropped.Add(w.unflushed)
		w.unflushed = 0
	}
	if w.cfg.Logger != nil {
		w.cfg.Logger.Error("recording stopped: a trace write failed; lines are dropped until a retry succeeds",
			"file", w.cfg.Path, "error", err.Error(), "retry_every", RetryEvery.String())
	}
}

// retry tries to write again: it cuts the current file back to its last
// complete line (or renames and reopens, when it failed mid-rotation),
// and writes and flushes what is due.
func (w *Writer) retry() {
	w.lastTry = time.Now()
	failed := w.failing
	var err error
	switch {
	case w.rename:
		if err = os.Rename(w.cfg.Path, w.cfg.Path+".1"); err == nil {
			w.rename = false
			w.file++
			err = w.openFile()
		}
	case w.f == nil:
		err = w.openFile()
	case w.synced == 0:
		// Not even the header reached the file: begin it again.
		_ = w.f.Close()
		w.f = nil
		err = w.openFile()
	default:
		if err = w.f.Truncate(w.synced); err == nil {
			if _, err = w.f.Seek(w.synced, io.SeekStart); err == nil {
				w.size = w.synced
				w.bw.Reset(w.f)
			}
		}
	}
	if err == nil {
		err = w.bw.Flush()
	}
	if err != nil {
		w.bw.Reset(w.f)
		w.failing = w.pathError(err)
		w.publishStopped()
		return
	}
	w.synced = w.size
	w.failing = nil
	w.stopped.Store(nil)
	if w.cfg.Logger != nil {
		w.cfg.Logger.Info("recording resumed: a trace write succeeded again", "file", w.cfg.Path,
			"stopped_on", failed.Error(), "dropped_lines_total", w.dropped.Load())
	}
}

// publishStopped hands the error the recording is stopped on to Err.
func (w *Writer) publishStopped() {
	err := w.failing
	w.stopped.Store(&err)
}

// openFile opens the current file and writes its header; on error the
// file is nil again.
func (w *Writer) openFile() error {
	if err := w.open(); err != nil {
		w.f = nil
		return err
	}
	return nil
}

// open creates the current file and writes its header into the buffer.
func (w *Writer) open() error {
	f, err := w.cfg.Create(w.cfg.Path)
	if err != nil {
		return err
	}
	w.f, w.size, w.synced = f, 0, 0
	w.bw.Reset(f)
	w.fragments.reset() // a file's "same" names only its own lines
	h := Line{Kind: KindHeader, Header: &Header{Version: Version, StartUnixNano: w.cfg.StartUnixNano, File: w.file, PolicySHA256: w.cfg.PolicySHA256}}
	line, err := AppendLine(w.line[:0], &h)
	w.line = line
	if err != nil {
		_ = f.Close()
		return err
	}
	n, err := w.bw.Write(line)
	w.size += int64(n)
	if err != nil {
		_ = f.Close()
		return err
	}
	return nil
}

// rotate ends the current file as Path.1 and starts the next. A file
// that cannot be flushed and synced is kept (the failure is retried on
// it); one that was synced but could not be renamed is renamed on retry.
func (w *Writer) rotate() {
	if !w.flush() {
		return
	}
	if err := w.f.Sync(); err != nil {
		w.fail(err)
		return
	}
	err := w.f.Close()
	w.f = nil
	if err == nil {
		err = os.Rename(w.cfg.Path, w.cfg.Path+".1")
	}
	if err != nil {
		w.rename = true
		w.fail(err)
		return
	}
	w.file++
	if err := w.openFile(); err != nil {
		w.fail(err)
		return
	}
	w.flush() // the header at once: a file is never left without one
}

// finish ends the last file.
func (w *Writer) finish() {
	if w.failing != nil {
		w.finalError = w.failing
	}
	if w.f == nil {
		return
	}
	err := w.bw.Flush()
	if e := w.f.Sync(); err == nil {
		err = e
	}
	if e := w.f.Close(); err == nil {
		err = e
	}
	w.f = nil
	if err != nil && w.finalError == nil {
		w.finalError = w.pathError(err)
	}
}
