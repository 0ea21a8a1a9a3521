package trace

import (
	"fmt"
	"io"
	"os"
	"time"
)

// run is the writing goroutine: it takes the queued lines, encodes and
// flushes them, stops on a failed write and retries, and rotates the
// files.
func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case l := <-w.lines:
			w.take(&l)
			w.drain(tick.C)
			w.settle()
		case <-tick.C:
			w.settle()
		case <-w.stop:
			w.drain(nil)
			w.lastTry = time.Time{} // a stopped recording tries once more
			w.settle()
			w.finish()
			return
		}
	}
}

// take writes a line taken from the queue.
func (w *Writer) take(l *Line) {
	w.queued.Add(-l.QueuedBytes())
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

// drain writes queued lines until the queue is momentarily empty; while
// it does, a tick still flushes (and reports drops).
func (w *Writer) drain(tick <-chan time.Time) {
	for n := 1; ; n++ {
		select {
		case l := <-w.lines:
			w.take(&l)
		default:
			return
		}
		if n%tickEvery != 0 {
			continue
		}
		select {
		case <-tick:
			w.settle()
		default:
		}
	}
}

// tickEvery is how many lines drain writes between looks at the ticker
// (a look takes the timer's lock and reads the clock).
const tickEvery = 64

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
	line, err := AppendLine(buf, l)
	if err != nil {
		// A line that cannot be encoded (a NaN pressure) is dropped.
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
