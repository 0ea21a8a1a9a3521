//go:build !linux

package linuxtest

// Threads reports ErrUnsupported: only Linux has /proc/<pid>/status.
func Threads(procPidDir string) (int, error) { return 0, ErrUnsupported }

// Descriptors reports ErrUnsupported: only Linux has /proc/<pid>/fd.
func Descriptors(procPidDir string) (int, error) { return 0, ErrUnsupported }

// Sockets reports ErrUnsupported: only Linux has /proc/<pid>/fd.
func Sockets(procPidDir string) (int, error) { return 0, ErrUnsupported }

// Children reports ErrUnsupported: only Linux has /proc/<pid>/task.
func Children(procPidDir string) (int, error) { return 0, ErrUnsupported }
