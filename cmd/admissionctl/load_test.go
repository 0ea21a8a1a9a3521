package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func loadFixture(name string, parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "node", "loadsampler", "testdata", name}, parts...)...)
}

// admissionctl load prints the documented line exactly for a fixture with PSI
// and a cgroup v2 limit.
func TestLoadPrintsOneSampleWithItsSources(t *testing.T) {
	code, stdout, stderr := runCommand(t, "load", "-proc", loadFixture("psi-cgroup2", "proc"),
		"-cgroup", loadFixture("psi-cgroup2", "cgroup", "job.slice"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := `{"cpu": 0.42, "memory": 0.9, "sources": {"cpu": "psi", "memory": "cgroup2"}}` + "\n"; stdout != want {
		t.Fatalf("stdout = %q, want %q", stdout, want)
	}
}

// Without PSI the fallbacks are named; the output is JSON.
func TestLoadNamesTheFallbacks(t *testing.T) {
	code, stdout, stderr := runCommand(t, "load", "-proc", loadFixture("nopsi-cgroup1", "proc"),
		"-cgroup", loadFixture("nopsi-cgroup1", "cgroup", "memory", "job"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		CPU     float64
		Memory  float64
		Sources map[string]string
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	if got.Memory != 0.75 || got.Sources["cpu"] != "loadavg" || got.Sources["memory"] != "meminfo" || got.CPU <= 0 || got.CPU > 1 {
		t.Errorf("got %+v, want loadavg and meminfo 0.75", got)
	}
}

// A present but malformed or unreadable source is an error naming the
// file, exit 1, and nothing on stdout.
func TestLoadFailsOnAnUnusableSource(t *testing.T) {
	for _, c := range []struct {
		fixture string
		cgroup  []string // the -cgroup directory under the fixture, if any
		file    []string
	}{
		{"malformed-psi-avg10", nil, []string{"proc", "pressure", "cpu"}},
		{"unreadable-psi", nil, []string{"proc", "pressure", "cpu"}},
		{"malformed-cgroup2-max", []string{"cgroup", "job.slice"}, []string{"cgroup", "job.slice", "memory.max"}},
	} {
		t.Run(c.fixture, func(t *testing.T) {
			args := []string{"load", "-proc", loadFixture(c.fixture, "proc")}
			if c.cgroup != nil {
				args = append(args, "-cgroup", loadFixture(c.fixture, c.cgroup...))
			}
			code, stdout, stderr := runCommand(t, args...)
			if file := loadFixture(c.fixture, c.file...); code != 1 || stdout != "" || !strings.Contains(stderr, file) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, and %s named", code, stdout, stderr, file)
			}
		})
	}
}

func TestLoadMisuseExitsTwo(t *testing.T) {
	for _, args := range [][]string{{"load", "-frobnicate"}, {"load", "extra"}} {
		if code, stdout, _ := runCommand(t, args...); code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, stdout)
		}
	}
}

// On this machine, with no flags, it reads the real /proc.
func TestLoadReadsThisMachine(t *testing.T) {
	code, stdout, stderr := runCommand(t, "load")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	t.Logf("this machine: %s", strings.TrimSpace(stdout))
}
