package linuxtest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"latent.dev/admission/linuxtest"
)

func fixture(name string) string { return filepath.Join("testdata", "proc", name) }

func TestThreadsFromStatusFixtures(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		want    int
		wantErr error
	}{
		{"threads line is read among the other status lines", fixture("busy"), 3, nil},
		{"status without a threads line is malformed", fixture("no-threads-line"), 0, linuxtest.ErrMalformed},
		{"threads line without a number is malformed", fixture("bad-threads"), 0, linuxtest.ErrMalformed},
		{"missing status is the file system's error", fixture("absent"), 0, fs.ErrNotExist},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := linuxtest.Threads(test.dir)
			if got != test.want || !errors.Is(err, test.wantErr) {
				t.Fatalf("Threads = %d, %v; want %d, %v", got, err, test.want, test.wantErr)
			}
		})
	}
}

func TestChildrenFromTaskFixtures(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		want    int
		wantErr error
	}{
		{"children of every thread are counted once each", fixture("busy"), 3, nil},
		{"empty children files mean no children", fixture("no-children"), 0, nil},
		{"a child that is not a process ID is malformed", fixture("bad-children"), 0, linuxtest.ErrMalformed},
		{"threads without children files mean the kernel lacks them", fixture("no-children-files"), 0, linuxtest.ErrUnsupported},
		{"missing task directory is the file system's error", fixture("absent"), 0, fs.ErrNotExist},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got, err := linuxtest.Children(test.dir)
			if got != test.want || !errors.Is(err, test.wantErr) {
				t.Fatalf("Children = %d, %v; want %d, %v", got, err, test.want, test.wantErr)
			}
		})
	}
}

// writeDescriptors builds procPidDir/fd with one symlink per target, the way
// the kernel presents descriptors; symlinks do not survive every checkout,
// so they are made here rather than committed.
func writeDescriptors(t *testing.T, procPidDir string, targets ...string) {
	t.Helper()
	fdDir := filepath.Join(procPidDir, "fd")
	if err := os.MkdirAll(fdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for fd, target := range targets {
		if err := os.Symlink(target, filepath.Join(fdDir, strconv.Itoa(fd))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDescriptorsAndSocketsFromFdFixtures(t *testing.T) {
	tests := []struct {
		name        string
		targets     []string
		descriptors int
		sockets     int
	}{
		{"no descriptors", nil, 0, 0},
		{"files and pipes are descriptors but not sockets", []string{"/dev/null", "pipe:[5]", "anon_inode:[eventpoll]"}, 3, 0},
		{"socket targets are counted as both", []string{"/dev/null", "socket:[1234]", "pipe:[5]", "socket:[99]"}, 4, 2},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			dir := t.TempDir()
			writeDescriptors(t, dir, test.targets...)
			descriptors, err := linuxtest.Descriptors(dir)
			if err != nil || descriptors != test.descriptors {
				t.Errorf("Descriptors = %d, %v; want %d", descriptors, err, test.descriptors)
			}
			sockets, err := linuxtest.Sockets(dir)
			if err != nil || sockets != test.sockets {
				t.Errorf("Sockets = %d, %v; want %d", sockets, err, test.sockets)
			}
		})
	}
}

// The reader skips its own listing handle by number only when that number
// also points at the listed directory; in another process's fd directory the
// same number is an ordinary descriptor.
func TestDescriptorsCountsAnotherProcesssDescriptorWithTheListingNumber(t *testing.T) {
	dir := t.TempDir()
	targets := make([]string, 64)
	for i := range targets {
		targets[i] = "/dev/null"
	}
	writeDescriptors(t, dir, targets...)
	if got, err := linuxtest.Descriptors(dir); err != nil || got != len(targets) {
		t.Fatalf("Descriptors = %d, %v; want %d", got, err, len(targets))
	}
}

func TestDescriptorsWithoutFdDirectoryIsTheFileSystemsError(t *testing.T) {
	if _, err := linuxtest.Descriptors(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Descriptors error = %v; want fs.ErrNotExist", err)
	}
	if _, err := linuxtest.Sockets(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Sockets error = %v; want fs.ErrNotExist", err)
	}
}

func TestSampleReadsEveryCount(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fixture("busy"))); err != nil {
		t.Fatal(err)
	}
	writeDescriptors(t, dir, "/dev/null", "socket:[7]")
	got, err := linuxtest.Sample(dir)
	want := linuxtest.Counts{Threads: 3, Descriptors: 2, Sockets: 1, Children: 3}
	if err != nil || got != want {
		t.Fatalf("Sample = %v, %v; want %v", got, err, want)
	}
}

func TestSampleStopsAtTheFirstError(t *testing.T) {
	got, err := linuxtest.Sample(fixture("no-threads-line"))
	if !errors.Is(err, linuxtest.ErrMalformed) || got != (linuxtest.Counts{}) {
		t.Fatalf("Sample = %v, %v; want zero counts and ErrMalformed", got, err)
	}
}

func TestCountsSubIsFieldByField(t *testing.T) {
	after := linuxtest.Counts{Threads: 9, Descriptors: 12, Sockets: 3, Children: 1}
	before := linuxtest.Counts{Threads: 8, Descriptors: 10, Sockets: 3, Children: 2}
	want := linuxtest.Counts{Threads: 1, Descriptors: 2, Sockets: 0, Children: -1}
	if got := after.Sub(before); got != want {
		t.Fatalf("Sub = %v; want %v", got, want)
	}
}
