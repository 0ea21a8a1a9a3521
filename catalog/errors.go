package catalog

import (
	"errors"
	"strconv"
)

var (
	// ErrNotResolved is returned by [Pin.Resolve] when the pin holds no
	// deployment, no route of that name, or a route whose weights sum to
	// zero. It names nothing from the target on purpose: an adapter may
	// hand it to a caller as is.
	ErrNotResolved = errors.New("catalog: target does not resolve to a revision")

	// ErrNotDeployed is returned by [Catalog.Delete] for a (tenant, service)
	// pair that has no deployment; no generation is consumed.
	ErrNotDeployed = errors.New("catalog: no such deployment")

	// ErrInvalidDeployment is returned by [Catalog.Deploy] for a deployment
	// that breaks a rule; the error also carries a [latent.dev/admission/problems.List] with
	// one path per problem.
	ErrInvalidDeployment = errors.New("catalog: invalid deployment")

	// ErrCapacityExceeded is returned by [Catalog.Deploy] when the catalog
	// would hold more revisions or policy bytes than its capacity allows.
	// The catalog is unchanged.
	ErrCapacityExceeded = errors.New("catalog: capacity exceeded")

	// ErrGenerationExhausted is returned when the generation counter would
	// wrap; generations are never reused, so the catalog stops changing.
	ErrGenerationExhausted = errors.New("catalog: generation counter exhausted")

	// ErrStoreExists is returned by [Create] when the directory already
	// holds a store.
	ErrStoreExists = errors.New("already exists")

	// ErrStoreMissing is returned by [Open] when the store file is absent.
	ErrStoreMissing = errors.New("missing")

	// ErrStoreInUse is returned by [Open] and [Create], and by
	// [Catalog.WriteStore] for a directory other than the catalog's own,
	// when another open catalog, in this process or any other, holds the
	// directory's lock. The directory is left untouched; the *[StoreError]
	// that carries it names the directory.
	ErrStoreInUse = errors.New("in use: another open catalog holds its lock")

	// ErrClosed is returned by [Catalog.Deploy] and [Catalog.Delete] after
	// [Catalog.Close]. Pins taken before, and [Catalog.Pin], keep working.
	ErrClosed = errors.New("catalog: closed")

	// ErrChecksumMismatch is returned by [Open] when a record's SHA-256 or
	// the file digest does not match its content.
	ErrChecksumMismatch = errors.New("checksum mismatch")

	// ErrTruncated is returned by [Open] when the store ends before its end
	// record.
	ErrTruncated = errors.New("truncated")

	// ErrMalformed is returned by [Open] when the store's checksums hold but
	// its content is not a valid catalog (a bad magic number, an unknown
	// record, a count that does not add up, a deployment that breaks a
	// rule). A writer bug or a foreign file, never a torn write.
	ErrMalformed = errors.New("malformed")
)

// StoreError is a failure to read or write a catalog store. It names the
// file and, when reading, the record that failed; errors.Is finds Reason
// (one of the Err* values above) and the underlying cause, if any.
type StoreError struct {
	File   string // path of the file that failed
	Record int    // index of the failing record, or -1
	Op     string // what was being done: "open", "write", "fsync", "rename", ...
	Reason error  // a sentinel such as ErrChecksumMismatch; nil for an I/O error
	Detail string // optional, fixed-vocabulary context
	Cause  error  // the underlying error, if any
}

func (e *StoreError) Error() string {
	s := "catalog: store " + e.File
	if e.Record >= 0 {
		s += ": record " + strconv.Itoa(e.Record)
	}
	s += ": " + e.Op
	if e.Reason != nil {
		s += ": " + e.Reason.Error()
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the reason and the cause.
func (e *StoreError) Unwrap() []error {
	var errs []error
	if e.Reason != nil {
		errs = append(errs, e.Reason)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}
