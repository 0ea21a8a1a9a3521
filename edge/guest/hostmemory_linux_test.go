package guest

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimitReadsBothVersions(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "fs", "v2", "memory.max"), "1073741824\n")
	write(filepath.Join(root, "fs", "unlimited", "memory.max"), "max\n")
	write(filepath.Join(root, "fs", "memory", "v1", "memory.limit_in_bytes"), "536870912\n")
	for _, c := range []struct {
		name, self string
		want       uint64
	}{
		{"cgroup v2 with a limit", "0::/v2\n", 1 << 30},
		{"cgroup v2 without one", "0::/unlimited\n", math.MaxUint64},
		{"cgroup v1's memory controller", "12:cpu,cpuacct:/x\n5:memory:/v1\n", 1 << 29},
		{"a cgroup whose files are missing", "0::/gone\n", math.MaxUint64},
	} {
		t.Run(c.name, func(t *testing.T) {
			self := filepath.Join(t.TempDir(), "cgroup")
			write(self, c.self)
			if got := cgroupMemoryLimit(self, filepath.Join(root, "fs")); got != c.want {
				t.Fatalf("got %d, want %d", got, c.want)
			}
		})
	}
	if got := cgroupMemoryLimit(filepath.Join(root, "none"), root); got != math.MaxUint64 {
		t.Fatalf("no /proc/self/cgroup: %d", got)
	}
}
