package strictjson

import (
	"io"
	"io/fs"
)

// The limits every document is held to; the package documentation says
// why each exists.
const (
	// MaxDocumentBytes is the largest document Parse and ReadAll accept.
	MaxDocumentBytes = 8 << 20
	// MaxDepth is how deeply arrays and objects may nest.
	MaxDepth = 64
	// MaxNumberDigits is the most decimal digits one number may hold,
	// counting its integer, fraction and exponent digits.
	MaxNumberDigits = 256
	// MaxProblems is the most problems one document reports; a final
	// problem says when more were found.
	MaxProblems = 1000
	// MaxPathKeyBytes is the most bytes of one object key a path shows.
	MaxPathKeyBytes = 64
	// MaxPathBytes is about the longest path a problem shows; see
	// [Value.Path].
	MaxPathBytes = 1024
)

// ReadAll reads a whole document from r, reading at most one byte more
// than MaxDocumentBytes: a longer input returns ErrTooLarge however long,
// or endless, it is. A regular file (an r with a Stat method, as *os.File)
// that is already too large is refused without being read, and one that
// fits is read into a buffer of its size.
func ReadAll(r io.Reader) ([]byte, error) {
	size := 512
	if f, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			if info.Size() > MaxDocumentBytes {
				return nil, ErrTooLarge
			}
			size = int(info.Size()) + 1 // the +1 sees the end without growing
		}
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > MaxDocumentBytes {
				return nil, ErrTooLarge
			}
			if len(buf) == MaxDocumentBytes {
				if err := probeEnd(r); err != nil {
					return nil, err
				}
				return buf, nil
			}
			// Doubling, not append's gentler growth: the garbage left
			// behind stays under the final size.
			grown := make([]byte, len(buf), min(2*cap(buf), MaxDocumentBytes))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// probeEnd reads one more byte after a full buffer: nil at the end of the
// input, ErrTooLarge if there is more.
func probeEnd(r io.Reader) error {
	var probe [1]byte
	for {
		n, err := r.Read(probe[:])
		switch {
		case n > 0:
			return ErrTooLarge
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}
