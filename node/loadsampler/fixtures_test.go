package loadsampler_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"latent.dev/admission/node/loadsampler"
)

// fixture reads testdata/name as the node would: its proc/ as /proc, its
// cgroup/ as /sys/fs/cgroup, and four usable CPUs.
func fixture(name string) loadsampler.Files {
	dir := filepath.Join("testdata", name)
	return loadsampler.Files{Proc: filepath.Join(dir, "proc"), CgroupRoot: filepath.Join(dir, "cgroup"), CPUs: 4}
}

// Every fixture's one-shot reading, exactly. The fixtures share numbers:
// CPU PSI avg10 42.00, memory PSI avg10 20.00, loadavg 1.00 over four
// CPUs, meminfo 1 - 1000000/4000000 kB, a cgroup limit 1024000000 bytes
// (v2) or 2048000000 (v1), physical memory 4096000000 bytes.
func TestOneShotReadingOfEveryFixture(t *testing.T) {
	psi, loadavg := loadsampler.CPUPSI, loadsampler.CPULoadavg
	cases := []struct {
		fixture     string
		rule        string
		cpu, memory float64
		sources     loadsampler.Sources
	}{
		{"psi-cgroup2", "the cgroup v2 ratio above the PSI share decides memory", 0.42, 0.9, loadsampler.Sources{psi, loadsampler.MemoryCgroup2}},
		{"psi-cgroup2-max", "memory.max of max is no limit", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"psi-cgroup2-no-max-file", "a cgroup without memory.max has no limit", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"psi-cgroup2-psi-larger", "the PSI share above the cgroup ratio decides memory", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"psi-cgroup2-zero-limit", "a zero limit is full", 0.42, 1, loadsampler.Sources{psi, loadsampler.MemoryCgroup2}},
		{"psi-cgroup2-root", "the v2 root cgroup has no memory files: no cgroup", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"cgroup2-hybrid-unified", "v2 mounted at unified/ on a hybrid host", 0.42, 0.5, loadsampler.Sources{psi, loadsampler.MemoryCgroup2}},
		{"psi-cgroup1", "the cgroup v1 ratio decides memory", 0.42, 0.5, loadsampler.Sources{psi, loadsampler.MemoryCgroup1}},
		{"psi-cgroup1-limit-at-physical", "a v1 limit equal to MemTotal is no limit", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"psi-cgroup1-limit-above-physical", "the v1 unlimited value is no limit", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"cgroup1-namespace-root", "a path absent under the hierarchy falls back to its root", 0.42, 0.8, loadsampler.Sources{psi, loadsampler.MemoryCgroup1}},
		{"psi-nocgroup", "no self/cgroup: PSI alone", 0.42, 0.2, loadsampler.Sources{psi, loadsampler.MemoryPSI}},
		{"psi-cpu-only", "no memory PSI: meminfo", 0.42, 0.75, loadsampler.Sources{psi, loadsampler.MemoryMeminfo}},
		{"nopsi-nocgroup", "no PSI: loadavg over CPUs and meminfo", 0.25, 0.75, loadsampler.Sources{loadavg, loadsampler.MemoryMeminfo}},
		{"nopsi-cgroup2", "no PSI: the cgroup ratio above meminfo decides", 0.25, 0.9, loadsampler.Sources{loadavg, loadsampler.MemoryCgroup2}},
		{"nopsi-cgroup1", "no PSI: meminfo above the cgroup ratio decides", 0.25, 0.75, loadsampler.Sources{loadavg, loadsampler.MemoryMeminfo}},
		{"nopsi-loadavg-above-cpus", "a load above the usable CPUs is clamped to 1", 1, 0.75, loadsampler.Sources{loadavg, loadsampler.MemoryMeminfo}},
	}
	for _, c := range cases {
		t.Run(c.fixture+"/"+c.rule, func(t *testing.T) {
			got, err := loadsampler.ReadOnce(fixture(c.fixture))
			if err != nil {
				t.Fatal(err)
			}
			want := loadsampler.Reading{CPU: c.cpu, Memory: c.memory, Sources: c.sources}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

// A source that is present but unusable is an error naming the file,
// never a silent fallback; so is a fallback that is needed but missing.
func TestUnusableSourcesAreErrorsNamingTheFile(t *testing.T) {
	cases := []struct {
		fixture string
		file    string // under the fixture
		problem string
	}{
		{"unreadable-psi", "proc/pressure/cpu", "unreadable"},
		{"unreadable-meminfo", "proc/meminfo", "unreadable"},
		{"unreadable-cgroup2-current", "cgroup/job.slice/memory.current", "unreadable"},
		{"unreadable-cgroup1-limit", "cgroup/memory/job/memory.limit_in_bytes", "unreadable"},
		{"unreadable-self-cgroup", "proc/self/cgroup", "unreadable"},
		{"missing-loadavg", "proc/loadavg", "unreadable"},
		{"missing-meminfo-for-cgroup1", "proc/meminfo", "unreadable"},
		{"malformed-psi-avg10", "proc/pressure/cpu", "malformed avg10"},
		{"malformed-psi-avg10-range", "proc/pressure/memory", "malformed avg10"},
		{"malformed-psi-total", "proc/pressure/cpu", "malformed total"},
		{"malformed-psi-no-some", "proc/pressure/cpu", "malformed some line"},
		{"malformed-loadavg", "proc/loadavg", "malformed 1-minute load"},
		{"malformed-meminfo-number", "proc/meminfo", "malformed MemTotal"},
		{"malformed-meminfo-no-available", "proc/meminfo", "malformed MemAvailable"},
		{"malformed-cgroup2-current", "cgroup/job.slice/memory.current", "malformed byte count"},
		{"malformed-cgroup2-max", "cgroup/job.slice/memory.max", "malformed byte count"},
		{"malformed-cgroup1-limit", "cgroup/memory/job/memory.limit_in_bytes", "malformed byte count"},
		{"malformed-self-cgroup", "proc/self/cgroup", "malformed line"},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			_, err := loadsampler.ReadOnce(fixture(c.fixture))
			var fe *loadsampler.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FileError", err)
			}
			if want := filepath.Join("testdata", c.fixture, c.file); fe.Path != want || fe.Problem != c.problem {
				t.Fatalf("got %s: %s, want %s: %s", fe.Path, fe.Problem, want, c.problem)
			}
			if !strings.Contains(err.Error(), fe.Path) {
				t.Errorf("message %q does not name the file", err)
			}
		})
	}
}

// -cgroup names the directory itself; its files tell the version.
func TestExplicitCgroupDirectory(t *testing.T) {
	f := fixture("psi-nocgroup")
	f.Cgroup = filepath.Join("testdata", "psi-cgroup2", "cgroup", "job.slice")
	if got, err := loadsampler.ReadOnce(f); err != nil || got.Memory != 0.9 || got.Sources.Memory != loadsampler.MemoryCgroup2 {
		t.Errorf("v2 directory: %+v, %v; want 0.9 from cgroup2", got, err)
	}
	f.Cgroup = filepath.Join("testdata", "psi-cgroup1", "cgroup", "memory", "job")
	if got, err := loadsampler.ReadOnce(f); err != nil || got.Memory != 0.5 || got.Sources.Memory != loadsampler.MemoryCgroup1 {
		t.Errorf("v1 directory: %+v, %v; want 0.5 from cgroup1", got, err)
	}
	f.Cgroup = filepath.Join("testdata", "psi-nocgroup", "proc")
	if _, err := loadsampler.ReadOnce(f); !errors.Is(err, loadsampler.ErrNoCgroupMemory) || !strings.Contains(err.Error(), f.Cgroup) {
		t.Errorf("a directory without memory files: %v, want ErrNoCgroupMemory naming it", err)
	}
}
