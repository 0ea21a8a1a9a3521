package guest

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// systemMemoryBytes is the smaller of physical memory and this process's
// memory cgroup limit (cgroup v2 memory.max, v1 memory.limit_in_bytes).
func systemMemoryBytes() uint64 {
	limit := uint64(math.MaxUint64)
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) == nil && info.Totalram > 0 {
		limit = uint64(info.Totalram) * uint64(max(info.Unit, 1))
	}
	return min(limit, cgroupMemoryLimit("/proc/self/cgroup", "/sys/fs/cgroup"))
}

// cgroupMemoryLimit reads the memory limit of the cgroup that selfCgroup
// (/proc/self/cgroup) names under root; the largest value when there is
// none or it cannot be read.
func cgroupMemoryLimit(selfCgroup, root string) uint64 {
	data, err := os.ReadFile(selfCgroup)
	if err != nil {
		return math.MaxUint64
	}
	limit := uint64(math.MaxUint64)
	for line := range bytes.Lines(data) {
		// hierarchy-ID:controllers:path
		fields := bytes.SplitN(bytes.TrimSpace(line), []byte(":"), 3)
		if len(fields) != 3 {
			continue
		}
		path := string(fields[2])
		switch {
		case string(fields[0]) == "0" && len(fields[1]) == 0:
			limit = min(limit, readLimit(filepath.Join(root, path, "memory.max")))
		case hasController(fields[1], "memory"):
			limit = min(limit, readLimit(filepath.Join(root, "memory", path, "memory.limit_in_bytes")))
		}
	}
	return limit
}

func hasController(list []byte, name string) bool {
	for c := range bytes.SplitSeq(list, []byte(",")) {
		if string(c) == name {
			return true
		}
	}
	return false
}

// readLimit reads a byte count; "max", a missing file or anything else
// unreadable is no limit.
func readLimit(path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return math.MaxUint64
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return v
}
