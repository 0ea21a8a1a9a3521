package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// source is one file of the recording, as the reader reads it: opened
// when its turn comes, closed once read.
type source struct {
	path   string
	header Header
	f      *os.File
	br     *bufio.Reader
	line   int
	buf    []byte
	done   bool
	atEOF  bool      // the line last read ended the file without a newline
	kept   fragments // the decision parts a later line of the file may name in "same"
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
	if l.Header.Version < 1 || l.Header.Version > Version {
		return Header{}, &LineError{File: s.path, Line: s.line, Err: fmt.Errorf("version %d, this reader reads versions 1 to %d", l.Header.Version, Version)}
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
