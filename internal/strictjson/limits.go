package strictjson

import (
	"bytes"
	"errors"
	"io"
	"strconv"
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

// ErrTooLarge is returned by ReadAll, and reported by Parse, for an input
// longer than MaxDocumentBytes.
var ErrTooLarge = errors.New("input exceeds " + strconv.Itoa(MaxDocumentBytes) + " bytes")

// ReadAll reads a whole document from r, reading at most one byte more
// than MaxDocumentBytes: a longer input returns ErrTooLarge however long,
// or endless, it is.
func ReadAll(r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, MaxDocumentBytes+1))
	if err != nil {
		return nil, err
	}
	if n > MaxDocumentBytes {
		return nil, ErrTooLarge
	}
	return buf.Bytes(), nil
}
