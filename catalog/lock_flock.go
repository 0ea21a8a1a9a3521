//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris

package catalog

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockDir takes the exclusive lock of dir without waiting, or returns
// [ErrStoreInUse] when someone holds it. The lock is flock(2) on the lock
// file: it belongs to the open file description, so a second open of the
// same directory conflicts whether it comes from another process or from
// this one, and the kernel releases it when the descriptor is closed,
// including when the process dies. The descriptor is close-on-exec, so a
// child process never inherits the lock. Closing the returned file
// releases it.
func lockDir(dir string) (io.Closer, error) {
	name := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	var lockErr error
	if err := raw.Control(func(fd uintptr) {
		for {
			lockErr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
			if lockErr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		_ = f.Close()
		return nil, err
	}
	switch {
	case errors.Is(lockErr, unix.EWOULDBLOCK):
		_ = f.Close()
		return nil, ErrStoreInUse
	case lockErr != nil:
		_ = f.Close()
		return nil, &os.PathError{Op: "flock", Path: name, Err: lockErr}
	}
	return f, nil
}
