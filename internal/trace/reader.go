package trace

import (
	"errors"
	"fmt"
	"io"
	"sort"
)

// Reader bounds.
const (
	// DefaultWindow is how many lines a [Reader] holds to put them back
	// in order.
	DefaultWindow = 65536
	// WindowBytes bounds the bytes of the lines the window holds (their
	// length in the file, plus lineOverhead each): a gap that never fills
	// makes the reader move on once either bound is reached.
	WindowBytes = 64 << 20
	// lineOverhead is what a line held in the window costs besides its
	// bytes in the file.
	lineOverhead = 256
	// MaxLineBytes is the longest line a [Reader] accepts.
	MaxLineBytes = 1 << 20
	// KeptSamples is how many of the most recent load samples, by
	// Sequence, [Reader.Sample] can hand out.
	KeptSamples = 4096
)

// LineError is a line that could not be read: its file, its line number
// (from 1) and the problem.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Position names where a line was read.
type Position struct {
	File string
	Line int
}

func (p Position) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Reader reads the files of one recording and hands out their lines in
// Order, putting lines that reached the files out of order back in place
// within a bounded window. Load lines are also kept, as they are read, in
// a bounded map by Sequence ([Reader.Sample]): a decision may take its
// order before the sample it judged was recorded.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	files  []*source // sorted by header File index
	cur    int
	header Header
	window int

	pending  lineHeap
	held     int64  // bytes the window holds, as WindowBytes counts them
	maxHeld  int64  // WindowBytes
	seq      uint64 // read order, the heap's tie-break
	emitted  uint64 // the highest Order handed out
	anyOut   bool
	lastPos  Position
	stats    Stats
	samples  map[uint64]Load
	ring     [KeptSamples]uint64
	ringNext int
	ringLen  int
	strings  *interner
	scratch  Line // the line being decoded
	asm      assembly
	err      error
}

// Open reads the header of every file, checks that they belong to one
// recording, and returns a reader over them in File-index order. window
// is the reorder window in lines; 0 is [DefaultWindow].
func Open(paths []string, window int) (*Reader, error) {
	if len(paths) == 0 {
		return nil, errors.New("no trace file")
	}
	if window <= 0 {
		window = DefaultWindow
	}
	r := &Reader{window: window, maxHeld: WindowBytes, samples: make(map[uint64]Load), strings: new(interner)}
	r.pending.entries = make([]heapEntry, 0, min(window+1, 4096))
	r.pending.slab = make([]pendingLine, 0, min(window+1, 4096))
	for _, p := range paths {
		s := &source{path: p}
		h, err := s.open()
		if errors.Is(err, errNoHeader) {
			// Empty, or a header cut short: the recorder stopped as it
			// began this file. Nothing of the recording is in it.
			_ = s.close()
			r.stats.Torn = append(r.stats.Torn, Position{File: p, Line: 1})
			continue
		}
		if err != nil {
			r.closeAll()
			_ = s.close()
			return nil, err
		}
		s.header = h
		_ = s.close() // reopened when its turn comes
		r.files = append(r.files, s)
	}
	if len(r.files) == 0 {
		return nil, &LineError{File: paths[0], Line: 1, Err: errors.New("empty file: no header")}
	}
	sort.SliceStable(r.files, func(i, j int) bool { return r.files[i].header.File < r.files[j].header.File })
	first := r.files[0]
	r.header = first.header
	if first.header.File != 0 {
		r.stats.Gaps = append(r.stats.Gaps, FileRange{0, first.header.File - 1})
	}
	for i := 1; i < len(r.files); i++ {
		a, b := r.files[i-1], r.files[i]
		if b.header.StartUnixNano != first.header.StartUnixNano {
			return nil, &LineError{File: b.path, Line: 1, Err: fmt.Errorf("start_unix_ns %d is not %s's %d: not the same recording",
				b.header.StartUnixNano, first.path, first.header.StartUnixNano)}
		}
		if a.header.File == b.header.File {
			return nil, &LineError{File: b.path, Line: 1, Err: fmt.Errorf("file index %d is also %s's", b.header.File, a.path)}
		}
		if b.header.File > a.header.File+1 {
			r.stats.Gaps = append(r.stats.Gaps, FileRange{a.header.File + 1, b.header.File - 1})
		}
	}
	return r, nil
}

// Header is the first file's header.
func (r *Reader) Header() Header { return r.header }

// Files lists the files in the order they are read.
func (r *Reader) Files() []string {
	out := make([]string, len(r.files))
	for i, s := range r.files {
		out[i] = s.path
	}
	return out
}

// Stats is what the reader found so far that makes a replay inexact.
func (r *Reader) Stats() Stats {
	s := r.stats
	s.Gaps = append([]FileRange(nil), s.Gaps...)
	s.Torn = append([]Position(nil), s.Torn...)
	return s
}

// Pos is where the line Next last returned was read.
func (r *Reader) Pos() Position { return r.lastPos }

// Sample returns the load sample with Sequence seq, if it was read and
// is among the KeptSamples most recent ones read.
func (r *Reader) Sample(seq uint64) (Load, bool) {
	l, ok := r.samples[seq]
	return l, ok
}

// Next returns the next line in Order, or io.EOF after the last. Header
// lines are not returned (see [Reader.Header]). A catalog or deployment
// in parts is handed out as one line, with the whole payload, when its
// last part is next; parts without the others are left out and counted
// ([Stats.LostParts]). An error names the file and line; after one, Next
// returns it again.
func (r *Reader) Next() (Line, error) {
	for {
		l, err := r.nextLine()
		if err != nil {
			if err == io.EOF && r.asm.active {
				r.stats.LostParts += uint64(r.asm.next)
				r.asm = assembly{}
			}
			return l, err
		}
		whole, ok, err := r.assemble(l)
		if err != nil {
			r.err = err
			r.closeAll()
			return Line{}, err
		}
		if ok {
			return whole, nil
		}
	}
}

// nextLine is the next line in Order, parts as they are.
func (r *Reader) nextLine() (Line, error) {
	if r.err != nil {
		return Line{}, r.err
	}
	// The line that follows the last one handed out is handed out as soon
	// as it is in the window: orders are dense (each is drawn for one
	// line), so only a gap (a dropped line, a transaction that wrote
	// nothing) makes the reader fill the whole window before it moves on.
	for r.pending.len() <= r.window && r.held <= r.maxHeld && (r.pending.len() == 0 || r.pending.minOrder() != r.emitted+1) {
		ok, err := r.readOne()
		if err != nil {
			r.err = err
			r.closeAll()
			return Line{}, err
		}
		if !ok {
			break
		}
	}
	if r.pending.len() == 0 {
		r.err = io.EOF
		return Line{}, io.EOF
	}
	p := r.pending.pop()
	r.held -= p.bytes
	if r.anyOut && p.line.Order < r.emitted {
		r.stats.Late++
	} else {
		r.emitted, r.anyOut = p.line.Order, true
	}
	r.lastPos = p.pos
	r.stats.Lines++
	return p.line, nil
}

// readOne reads one line into the window; false when every file is read.
func (r *Reader) readOne() (bool, error) {
	for r.cur < len(r.files) {
		s := r.files[r.cur]
		if s.f == nil && !s.done {
			if _, err := s.open(); err != nil {
				return false, err
			}
		}
		data, final, err := s.readLine()
		if err == io.EOF {
			s.done = true
			_ = s.close()
			r.cur++
			continue
		}
		if err != nil {
			return false, err
		}
		l := &r.scratch
		*l = Line{}
		if err := decodeLine(data, l, r.strings); err != nil {
			if final {
				// A last line without its newline that does not decode
				// was cut short: the recording ends there, inexact.
				r.stats.Torn = append(r.stats.Torn, Position{File: s.path, Line: s.line})
				s.done = true
				_ = s.close()
				r.cur++
				continue
			}
			return false, &LineError{File: s.path, Line: s.line, Err: err}
		}
		switch l.Kind {
		case KindHeader:
			return false, &LineError{File: s.path, Line: s.line, Err: errors.New("a header after the first line")}
		case KindCatalog:
			// A catalog in parts may run on into the next files.
			if (r.cur != 0 || s.header.File != 0) && (l.Catalog.Parts == 0 || l.Catalog.Part == 0) {
				return false, &LineError{File: s.path, Line: s.line, Err: errors.New("a catalog line outside the first file")}
			}
		case KindDecision:
			if err := s.kept.resolve(l.Decision); err != nil {
				return false, &LineError{File: s.path, Line: s.line, Err: err}
			}
		case KindLoad:
			r.keepSample(*l.Load)
		case KindDropped:
			r.stats.Dropped += l.Dropped.Lines
			r.stats.DroppedMarks++
		}
		r.seq++
		size := int64(len(data)) + lineOverhead
		r.held += size
		r.pending.push(pendingLine{line: *l, pos: Position{File: s.path, Line: s.line}, seq: r.seq, bytes: size})
		return true, nil
	}
	return false, nil
}

func (r *Reader) keepSample(l Load) {
	if _, ok := r.samples[l.Sequence]; ok {
		r.samples[l.Sequence] = l
		return
	}
	if r.ringLen == KeptSamples {
		delete(r.samples, r.ring[r.ringNext])
	} else {
		r.ringLen++
	}
	r.ring[r.ringNext] = l.Sequence
	r.ringNext = (r.ringNext + 1) % KeptSamples
	r.samples[l.Sequence] = l
}

// Close closes whatever file is open.
func (r *Reader) Close() error {
	r.closeAll()
	return nil
}

func (r *Reader) closeAll() {
	for _, s := range r.files {
		_ = s.close()
	}
}
