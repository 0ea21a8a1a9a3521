package linuxtest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Threads reports the number of threads from the "Threads:" line of
// procPidDir/status; the kernel counts them in one place, whereas listing
// task/ races with threads that start or exit mid-listing.
func Threads(procPidDir string) (int, error) {
	status, err := os.ReadFile(filepath.Join(procPidDir, "status"))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(status) {
		value, found := bytes.CutPrefix(line, []byte("Threads:"))
		if !found {
			continue
		}
		threads, err := strconv.Atoi(string(bytes.TrimSpace(value)))
		if err != nil || threads < 1 {
			return 0, ErrMalformed
		}
		return threads, nil
	}
	return 0, ErrMalformed
}

// Descriptors reports the number of open file descriptors in procPidDir/fd.
// The descriptor that Descriptors itself holds to list /proc/self/fd is not
// counted, so two samples of the calling process compare like for like.
func Descriptors(procPidDir string) (int, error) {
	names, err := descriptorNames(procPidDir)
	return len(names), err
}

// Sockets reports how many descriptors in procPidDir/fd are sockets: the
// kernel names their link target "socket:[inode]".
func Sockets(procPidDir string) (int, error) {
	names, err := descriptorNames(procPidDir)
	if err != nil {
		return 0, err
	}
	sockets := 0
	for _, name := range names {
		target, err := os.Readlink(filepath.Join(procPidDir, "fd", name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // closed since the listing
		}
		if err != nil {
			return 0, err
		}
		if strings.HasPrefix(target, "socket:") {
			sockets++
		}
	}
	return sockets, nil
}

// Children reports the number of distinct child processes listed in
// procPidDir/task/*/children. Each thread lists only the children it forked,
// and Go forks from whichever thread is running, so every thread is read; a
// thread that exits mid-read hands its children to a sibling, which may then
// list them again.
func Children(procPidDir string) (int, error) {
	taskDir := filepath.Join(procPidDir, "task")
	tasks, err := os.ReadDir(taskDir)
	if err != nil {
		return 0, err
	}
	var pids []int
	listed := false
	for _, task := range tasks {
		list, err := os.ReadFile(filepath.Join(taskDir, task.Name(), "children"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited, or the kernel lacks children files
		}
		if err != nil {
			return 0, err
		}
		listed = true
		for _, field := range strings.Fields(string(list)) {
			pid, err := strconv.Atoi(field)
			if err != nil || pid < 1 {
				return 0, ErrMalformed
			}
			pids = append(pids, pid)
		}
	}
	if !listed {
		return 0, ErrUnsupported
	}
	slices.Sort(pids)
	return len(slices.Compact(pids)), nil
}

// descriptorNames lists procPidDir/fd without the descriptor that is doing
// the listing. That one is recognised by number and by pointing at the very
// directory being listed, so another process's descriptor with the same
// number is still counted.
func descriptorNames(procPidDir string) ([]string, error) {
	fdDir := filepath.Join(procPidDir, "fd")
	dir, err := os.Open(fdDir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	listing, err := dir.Stat()
	if err != nil {
		return nil, err
	}
	own := strconv.FormatUint(uint64(dir.Fd()), 10)
	if i := slices.Index(names, own); i >= 0 {
		target, err := os.Stat(filepath.Join(fdDir, own))
		if err == nil && os.SameFile(target, listing) {
			names = slices.Delete(names, i, i+1)
		}
	}
	return names, nil
}
