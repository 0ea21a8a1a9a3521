// Package boundedfile reads a file that must not be larger than a bound:
// a token file, a certificate, a deployment. It reads at most one byte
// past the bound, so a huge or endless file costs no more than a file of
// the bound's size.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
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

// ErrNotRegular is returned by ReadRegular for a path that is not a
// regular file: a FIFO, a socket, a device or a directory.
var ErrNotRegular = errors.New("not a regular file (a FIFO, a device, a socket or a directory)")

// ReadRegular is Read for a file that a long-running process reads at
// start or at a reload: it opens without blocking (a FIFO without a
// writer would otherwise hold the open, and the process, until one
// comes) and refuses anything but a regular file, naming it, so that it
// never waits on a pipe or reads an endless device.
func ReadRegular(name string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, limit)
	}
	return data, nil
}

// CheckRegular reports an error naming name when it exists and is not
// a regular file, for a path that will be created or appended to (a
// FIFO there would block the opening). A missing file is no error.
func CheckRegular(name string) error {
	info, err := os.Stat(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", name, ErrNotRegular)
	}
	return nil
}
