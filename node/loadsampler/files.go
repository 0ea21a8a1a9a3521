package loadsampler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Files says where readings come from. The zero value reads the running
// system.
type Files struct {
	// Proc replaces /proc: it holds pressure/cpu, pressure/memory,
	// loadavg, meminfo and self/cgroup.
	Proc string
	// Cgroup is the cgroup's own directory: for v2 the one holding
	// memory.current, for v1 the memory controller's, holding
	// memory.usage_in_bytes. Empty: found through Proc/self/cgroup under
	// CgroupRoot.
	Cgroup string
	// CgroupRoot is where the cgroup hierarchies are mounted; empty is
	// /sys/fs/cgroup. It is used only to find Cgroup.
	CgroupRoot string
	// CPUs is the number of usable CPUs the loadavg fallback divides by;
	// 0 is the CPUs this process may run on.
	CPUs int
}

func (f Files) proc(name ...string) string {
	root := f.Proc
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, name...)...)
}

// cgroupVersion is which cgroup memory interface a directory offers.
type cgroupVersion uint8

const (
	noCgroup cgroupVersion = iota
	cgroupV1
	cgroupV2
)

// cgroupDir is the memory cgroup the sampler reads, found once.
type cgroupDir struct {
	version cgroupVersion
	dir     string
}

func (c cgroupDir) String() string {
	switch c.version {
	case cgroupV1:
		return "cgroup1 " + c.dir
	case cgroupV2:
		return "cgroup2 " + c.dir
	}
	return "none"
}

// readOptional reads a file that may legitimately be missing. absent is
// true only when it does not exist (or, for pressure files, when the
// kernel refuses PSI reads); any other failure is an error naming it.
func readOptional(path string) (data []byte, present bool, err error) {
	data, err = os.ReadFile(path)
	switch {
	case err == nil:
		return data, true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EOPNOTSUPP):
		return nil, false, nil
	}
	return nil, true, unreadable(path, err)
}

// readRequired reads a file the reading cannot do without.
func readRequired(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, unreadable(path, err)
	}
	return data, nil
}

// exists reports whether path exists; a failure other than its absence is
// an error naming it.
func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	}
	return false, unreadable(path, err)
}

// findCgroup resolves the memory cgroup: the named directory, or the one
// /proc/self/cgroup names under the cgroup root. A v1 memory hierarchy
// wins over v2 (on a hybrid host the memory controller is v1's). A path
// that does not exist under the root (a container that sees its own
// cgroup mounted at the root without a cgroup namespace) falls back to
// the hierarchy's root. No self/cgroup, or no memory files, is no cgroup.
func findCgroup(f Files) (cgroupDir, error) {
	if f.Cgroup != "" {
		if ok, err := exists(filepath.Join(f.Cgroup, "memory.current")); err != nil || ok {
			return cgroupDir{cgroupV2, f.Cgroup}, err
		}
		if ok, err := exists(filepath.Join(f.Cgroup, "memory.usage_in_bytes")); err != nil || ok {
			return cgroupDir{cgroupV1, f.Cgroup}, err
		}
		return cgroupDir{}, fmt.Errorf("%w: %s", ErrNoCgroupMemory, f.Cgroup)
	}
	selfPath := f.proc("self", "cgroup")
	data, present, err := readOptional(selfPath)
	if err != nil || !present {
		return cgroupDir{}, err
	}
	v1, v2, haveV1, haveV2, err := parseSelfCgroup(selfPath, data)
	if err != nil {
		return cgroupDir{}, err
	}
	root := f.CgroupRoot
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	if haveV1 {
		hierarchy := filepath.Join(root, "memory")
		for _, dir := range []string{filepath.Join(hierarchy, v1), hierarchy} {
			if ok, err := exists(filepath.Join(dir, "memory.usage_in_bytes")); err != nil || ok {
				return cgroupDir{cgroupV1, dir}, err
			}
		}
	}
	if haveV2 {
		hierarchy := root
		if ok, err := exists(filepath.Join(root, "cgroup.controllers")); err != nil {
			return cgroupDir{}, err
		} else if !ok {
			hierarchy = filepath.Join(root, "unified") // hybrid layout
		}
		for _, dir := range []string{filepath.Join(hierarchy, v2), hierarchy} {
			if ok, err := exists(filepath.Join(dir, "memory.current")); err != nil || ok {
				return cgroupDir{cgroupV2, dir}, err
			}
		}
	}
	return cgroupDir{}, nil
}
