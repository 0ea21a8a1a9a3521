// Package boundedfile reads a file that must not be larger than a bound:
// a token file, a certificate, a deployment. It reads at most one byte
// past the bound, so a huge or endless file costs no more than a file of
// the bound's size.
package boundedfile

import (
	"fmt"
	"io"
	"os"
)

// Read reads the file name, failing when it holds more than limit bytes.
// Every error names the file.
func Read(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}
