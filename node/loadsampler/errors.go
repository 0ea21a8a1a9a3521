package loadsampler

import (
	"errors"
	"fmt"
)

// FileError is a source file that is present but cannot be used: it
// could not be read, or what it holds is not what the kernel writes.
// Path is the file; the message never repeats the file's contents.
type FileError struct {
	Path string
	// Problem is fixed vocabulary: "unreadable", "malformed avg10", ...
	Problem string
	// Err is the underlying error of an unreadable file, or nil.
	Err error
}

func (e *FileError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("loadsampler: %s: %s: %v", e.Path, e.Problem, e.Err)
	}
	return fmt.Sprintf("loadsampler: %s: %s", e.Path, e.Problem)
}

func (e *FileError) Unwrap() error { return e.Err }

// ErrNoCgroupMemory is returned when an explicitly named cgroup directory
// holds neither memory.current (v2) nor memory.usage_in_bytes (v1).
var ErrNoCgroupMemory = errors.New("loadsampler: the cgroup directory holds no memory controller files")

// ErrInvalidConfig is returned by [New] for a configuration it cannot run:
// no target, or neither an interval nor a maximum observation age.
var ErrInvalidConfig = errors.New("loadsampler: invalid configuration")

func unreadable(path string, err error) error {
	return &FileError{Path: path, Problem: "unreadable", Err: err}
}

func malformed(path, what string) error {
	return &FileError{Path: path, Problem: "malformed " + what}
}
