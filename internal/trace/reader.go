package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
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

// Stats is what a [Reader] found that makes a replay inexact.
type Stats struct {
	// Dropped is the sum of the dropped lines' counts (the lines the
	// recorder lost); DroppedMarks is how many dropped lines there were.
	Dropped, DroppedMarks uint64
	// Late is the number of lines that arrived after a line with a
	// higher Order had been handed out: beyond the reorder window.
	Late uint64
	// Gaps lists the ranges of file indexes missing from the given files
	// (the first file's index is expected to be 0), at most one more
	// than the files.
	Gaps []FileRange
	// Torn lists the files whose last line was cut short (the recorder
	// stopped mid-line: a crash, a full disk): the recording ends there.
	Torn []Position
	// Lines is the number of lines Next took in order (each part of a
	// payload in parts counts).
	Lines uint64
	// LostParts counts the parts of a catalog or deployment in parts that
	// came without the others (a dropped line, a file that is gone): the
	// payload is not handed out.
	LostParts uint64
}

// FileRange is the file indexes From to To, both included.
type FileRange struct{ From, To uint64 }

func (g FileRange) String() string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d to %d", g.From, g.To)
}

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

type source struct {
	path   string
	header Header
	f      *os.File
	br     *bufio.Reader
	line   int
	buf    []byte
	done   bool
	atEOF  bool // the line last read ended the file without a newline
}

type pendingLine struct {
	line  Line
	pos   Position
	seq   uint64
	bytes int64
}

// lineHeap is a min-heap on (Order, read sequence) of small entries
// without pointers; the lines themselves wait in a slab.
type lineHeap struct {
	entries []heapEntry
	slab    []pendingLine
	free    []int32
}

type heapEntry struct {
	order, seq uint64
	slot       int32
}

func (a heapEntry) less(b heapEntry) bool {
	return a.order < b.order || (a.order == b.order && a.seq < b.seq)
}

func (h *lineHeap) len() int { return len(h.entries) }

func (h *lineHeap) push(p pendingLine) {
	var slot int32
	if n := len(h.free); n > 0 {
		slot = h.free[n-1]
		h.free = h.free[:n-1]
		h.slab[slot] = p
	} else {
		slot = int32(len(h.slab))
		h.slab = append(h.slab, p)
	}
	e := heapEntry{order: p.line.Order, seq: p.seq, slot: slot}
	i := len(h.entries)
	h.entries = append(h.entries, e)
	for i > 0 {
		parent := (i - 1) / 2
		if !e.less(h.entries[parent]) {
			break
		}
		h.entries[i] = h.entries[parent]
		i = parent
	}
	h.entries[i] = e
}

// minOrder is the smallest Order in the heap, which must not be empty.
func (h *lineHeap) minOrder() uint64 { return h.entries[0].order }

func (h *lineHeap) pop() pendingLine {
	top := h.entries[0]
	n := len(h.entries) - 1
	last := h.entries[n]
	h.entries = h.entries[:n]
	if n > 0 {
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if c+1 < n && h.entries[c+1].less(h.entries[c]) {
				c++
			}
			if !h.entries[c].less(last) {
				break
			}
			h.entries[i] = h.entries[c]
			i = c
		}
		h.entries[i] = last
	}
	p := h.slab[top.slot]
	h.slab[top.slot] = pendingLine{}
	h.free = append(h.free, top.slot)
	return p
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

// errNoHeader is a file without a whole header line: empty, or its only
// line cut short.
var errNoHeader = errors.New("empty file: no header")

// open opens s and reads its header line.
func (s *source) open() (Header, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return Header{}, err
	}
	s.f, s.br, s.line, s.done = f, bufio.NewReaderSize(f, 64<<10), 0, false
	data, final, err := s.readLine()
	if err == io.EOF {
		return Header{}, &LineError{File: s.path, Line: 1, Err: errNoHeader}
	}
	if err != nil {
		return Header{}, err
	}
	var l Line
	if err := DecodeLine(data, &l); err != nil {
		if final {
			return Header{}, &LineError{File: s.path, Line: s.line, Err: fmt.Errorf("%w: %v", errNoHeader, err)}
		}
		return Header{}, &LineError{File: s.path, Line: s.line, Err: err}
	}
	if l.Kind != KindHeader {
		return Header{}, &LineError{File: s.path, Line: s.line, Err: fmt.Errorf("the first line is a %q line, not a header", l.Kind)}
	}
	if l.Header.Version != Version {
		return Header{}, &LineError{File: s.path, Line: s.line, Err: fmt.Errorf("version %d, this reader reads version %d", l.Header.Version, Version)}
	}
	return *l.Header, nil
}

func (s *source) close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f, s.br = nil, nil
	return err
}

// readLine returns the next line without its newline (valid until the
// next call), or io.EOF; final says it is the file's last and has no
// newline (it may be torn). A line over MaxLineBytes is an error.
func (s *source) readLine() (data []byte, final bool, err error) {
	data, err = s.readLine1()
	final = err == nil && s.atEOF
	return data, final, err
}

func (s *source) readLine1() ([]byte, error) {
	s.atEOF = false
	for {
		s.buf = s.buf[:0]
		for {
			chunk, err := s.br.ReadSlice('\n')
			if len(s.buf)+len(chunk) > MaxLineBytes+1 {
				return nil, &LineError{File: s.path, Line: s.line + 1, Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
			}
			if err == bufio.ErrBufferFull {
				s.buf = append(s.buf, chunk...)
				continue
			}
			if err != nil && err != io.EOF {
				return nil, &LineError{File: s.path, Line: s.line + 1, Err: err}
			}
			var data []byte
			if len(s.buf) > 0 {
				s.buf = append(s.buf, chunk...)
				data = s.buf
			} else {
				data = chunk
			}
			if err == io.EOF && len(data) == 0 {
				return nil, io.EOF
			}
			s.line++
			s.atEOF = err == io.EOF
			data = trimNewline(data)
			if len(data) > MaxLineBytes {
				return nil, &LineError{File: s.path, Line: s.line, Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}
			}
			if len(data) == 0 {
				if err == io.EOF {
					return nil, io.EOF
				}
				return nil, &LineError{File: s.path, Line: s.line, Err: errors.New("empty line")}
			}
			return data, nil
		}
	}
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
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

// assembly is a payload in parts being put together.
type assembly struct {
	active      bool
	kind        string
	gen         uint64
	next, parts uint32
	buf         []byte
}

// assemble takes a line in order: a line not in parts is itself; a part
// joins the payload it continues, which is handed out with its last
// part (ok).
func (r *Reader) assemble(l Line) (Line, bool, error) {
	var part, parts uint32
	var data []byte
	var gen uint64
	switch {
	case l.Kind == KindCatalog && l.Catalog.Parts > 0:
		part, parts, data, gen = l.Catalog.Part, l.Catalog.Parts, l.Catalog.File, l.Catalog.Generation
	case l.Kind == KindDeploy && l.Change.DeploymentParts > 0:
		part, parts, data, gen = l.Change.DeploymentPart, l.Change.DeploymentParts, l.Change.Deployment, l.Change.Generation
	default:
		return l, true, nil
	}
	a := &r.asm
	if part == 0 {
		if a.active {
			r.stats.LostParts += uint64(a.next)
		}
		*a = assembly{active: true, kind: l.Kind, gen: gen, parts: parts}
	} else if !a.active || a.kind != l.Kind || a.gen != gen || a.parts != parts || a.next != part {
		// A part whose predecessors were lost (dropped, or in a file
		// that is gone).
		if a.active {
			r.stats.LostParts += uint64(a.next)
			*a = assembly{}
		}
		r.stats.LostParts++
		return Line{}, false, nil
	}
	if int64(len(a.buf))+int64(len(data)) > MaxPayloadBytes {
		pos := r.lastPos
		return Line{}, false, &LineError{File: pos.File, Line: pos.Line,
			Err: fmt.Errorf("a %s in parts longer than %d bytes", l.Kind, MaxPayloadBytes)}
	}
	a.buf = append(a.buf, data...)
	a.next++
	if a.next < parts {
		return Line{}, false, nil
	}
	whole := l
	switch l.Kind {
	case KindCatalog:
		c := *l.Catalog
		c.File, c.Part, c.Parts = a.buf, 0, 0
		whole.Catalog = &c
	default:
		c := *l.Change
		c.Deployment, c.DeploymentPart, c.DeploymentParts = a.buf, 0, 0
		whole.Change = &c
	}
	*a = assembly{}
	return whole, true, nil
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

// Inexact describes what the reader found that makes a replay inexact,
// one phrase each; none for a complete trace.
func (s Stats) Inexact() []string {
	var out []string
	if s.Dropped > 0 || s.DroppedMarks > 0 {
		out = append(out, fmt.Sprintf("%d lines dropped by the recorder", s.Dropped))
	}
	if s.Late > 0 {
		out = append(out, fmt.Sprintf("%d lines arrived beyond the reorder window", s.Late))
	}
	if len(s.Gaps) > 0 {
		idx := make([]string, len(s.Gaps))
		for i, g := range s.Gaps {
			idx[i] = g.String()
		}
		out = append(out, "trace files missing (file index "+strings.Join(idx, ", ")+")")
	}
	if s.LostParts > 0 {
		out = append(out, fmt.Sprintf("%d parts of a catalog or deployment came without their other parts", s.LostParts))
	}
	for _, p := range s.Torn {
		out = append(out, fmt.Sprintf("the recording ends in a torn line (%s)", p))
	}
	return out
}
