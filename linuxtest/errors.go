package linuxtest

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsupported is returned by every reader and by Isolated on a system
	// without Linux's /proc and process controls, and by Children when the
	// kernel was built without task children files (CONFIG_PROC_CHILDREN).
	// It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("linuxtest: not supported on this system: %w", errors.ErrUnsupported)

	// ErrMalformed is returned by a reader whose /proc file does not hold
	// what the kernel documents: no Threads line in status, or a children
	// file with something other than process IDs.
	ErrMalformed = errors.New("linuxtest: malformed /proc file")

	// ErrTimeout is returned by Isolated when the child ran past its
	// deadline; the child and its process group have been killed and the
	// child reaped.
	ErrTimeout = errors.New("linuxtest: isolated child ran past its deadline")

	// ErrChildFailed is returned by Isolated when the child exited with a
	// failure; it wraps the *exec.ExitError.
	ErrChildFailed = errors.New("linuxtest: isolated child failed")

	// ErrOutputHeld is returned by Isolated when the child exited but a
	// descendant that left its process group still held the child's output
	// open; that descendant was not killed.
	ErrOutputHeld = errors.New("linuxtest: a descendant outside the child's process group held its output open")

	// ErrOtherChild is returned by Isolated inside an isolated child for a
	// call whose body belongs to a different child: a test that makes
	// several Isolated calls must let it pass. RunIsolated ignores it.
	ErrOtherChild = errors.New("linuxtest: this body runs in a different isolated child")
)
