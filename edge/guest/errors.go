package guest

import (
	"errors"
	"fmt"
)

// Errors. Each is a fixed value; compare with errors.Is. Errors about one
// artifact arrive wrapped in an [*ArtifactError] that names it.
var (
	// ErrBadDigest: a digest is not "sha256:" followed by 64 lowercase
	// hexadecimal digits.
	ErrBadDigest = errors.New("guest: artifact digest is not sha256:<64 lowercase hex digits>")
	// ErrDigestMismatch: an artifact's bytes do not hash to its digest,
	// either as uploaded (Put) or as read back from disk (Load).
	ErrDigestMismatch = errors.New("guest: artifact bytes do not match the digest")
	// ErrArtifactNotFound: the store holds no file for the digest.
	ErrArtifactNotFound = errors.New("guest: artifact not found")
	// ErrArtifactTooLarge: an artifact is over the store's size limit.
	ErrArtifactTooLarge = errors.New("guest: artifact larger than the store's limit")
	// ErrArtifactIO: reading or writing the artifact file failed; the
	// ArtifactError's Cause says how.
	ErrArtifactIO = errors.New("guest: artifact file could not be read or written")
	// ErrInvalidModule: the artifact does not decode, validate or compile
	// as a WebAssembly module under the backend's runtime limits.
	ErrInvalidModule = errors.New("guest: artifact is not a valid WebAssembly module")
	// ErrNotCommand: the module is valid but not a WASI command: it must
	// export a "_start" function taking and returning nothing and a memory
	// named "memory", import no memory, table or global, and import
	// functions only from wasi_snapshot_preview1, each of which the
	// runtime provides.
	ErrNotCommand = errors.New("guest: module is not a WASI command")
	// ErrTooManyModules: a deployment would keep more compiled modules
	// than the backend's MaxModules.
	ErrTooManyModules = errors.New("guest: compiled module cache is full")
	// ErrClosed: the backend was closed.
	ErrClosed = errors.New("guest: backend closed")
	// ErrCellUncertain: Reset cannot vouch for a cell: a guest is still
	// on it, or its instance did not close cleanly.
	ErrCellUncertain = errors.New("guest: cell state uncertain after the guest")
	// ErrBuild: BuildGoGuest's go build failed; the BuildError carries the
	// compiler's output.
	ErrBuild = errors.New("guest: go build of the guest failed")
)

// ArtifactError is an error about one artifact: the digest (and, where a
// file was involved, its path), the fixed reason (one of the errors
// above) and the underlying cause, if any, for logs. Its message holds
// only the digest, the path and the fixed reason.
type ArtifactError struct {
	Digest Digest
	// File is the artifact's path in the store; empty when no file was
	// involved.
	File string
	// Err is the fixed reason.
	Err error
	// Cause is the underlying error (an I/O error, the runtime's compile
	// error), or nil. It is not part of the message.
	Cause error
}

func (e *ArtifactError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("guest: artifact %s (%s): %s", e.Digest, e.File, trimPrefix(e.Err))
	}
	return fmt.Sprintf("guest: artifact %s: %s", e.Digest, trimPrefix(e.Err))
}

// Unwrap gives both the reason and the cause to errors.Is and errors.As.
func (e *ArtifactError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Cause}
}

func trimPrefix(err error) string {
	const prefix = "guest: "
	s := err.Error()
	if len(s) > len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):]
	}
	return s
}

// Causes of an interruption the backend itself decides, read back from
// the run's context.
var (
	errFuelExhausted  = errors.New("guest: cpu fuel exhausted")
	errOutputTooLarge = errors.New("guest: standard output over the response bound")
)
