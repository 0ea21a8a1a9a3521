package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

var errCrash = errors.New("simulated crash")

// crashFS performs real file operations until the step named crashAt,
// which it refuses; from then on it refuses everything, as a dead process
// would do nothing more. With torn set, the crashing write first writes
// half its bytes.
type crashFS struct {
	osFS
	crashAt string
	torn    bool
	crashed bool
	steps   []string
}

func (f *crashFS) step(name string) error {
	f.steps = append(f.steps, name)
	if f.crashed || name == f.crashAt {
		f.crashed = true
		return errCrash
	}
	return nil
}

func (f *crashFS) CreateTemp(dir, pattern string) (tempFile, error) {
	if err := f.step("create"); err != nil {
		return nil, err
	}
	file, err := f.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &crashFile{tempFile: file, fs: f}, nil
}

func (f *crashFS) Rename(from, to string) error {
	if err := f.step("rename"); err != nil {
		return err
	}
	return f.osFS.Rename(from, to)
}

func (f *crashFS) SyncDir(dir string) error {
	if err := f.step("fsync directory"); err != nil {
		return err
	}
	return f.osFS.SyncDir(dir)
}

func (f *crashFS) Remove(name string) error {
	if f.crashed {
		return errCrash // a dead process cleans nothing up
	}
	return f.osFS.Remove(name)
}

type crashFile struct {
	tempFile
	fs *crashFS
}

func (c *crashFile) Write(p []byte) (int, error) {
	if c.fs.crashAt == "write" && c.fs.torn && !c.fs.crashed {
		n, _ := c.tempFile.Write(p[:len(p)/2])
		_ = c.fs.step("write")
		return n, errCrash
	}
	if err := c.fs.step("write"); err != nil {
		return 0, err
	}
	return c.tempFile.Write(p)
}

func (c *crashFile) Sync() error {
	if err := c.fs.step("fsync"); err != nil {
		return err
	}
	return c.tempFile.Sync()
}

func (c *crashFile) Close() error {
	err := c.fs.step("close")
	// The descriptor is released even in a crash: the kernel does that.
	if cerr := c.tempFile.Close(); err == nil {
		err = cerr
	}
	return err
}

func TestCrashDuringAStoreWriteLeavesTheOldOrTheNewGeneration(t *testing.T) {
	tests := []struct {
		crashAt string
		torn    bool
		want    string // "old" or "new"
	}{
		{"create", false, "old"},
		{"write", true, "old"},            // a torn temporary file
		{"write", false, "old"},           // nothing written
		{"fsync", false, "old"},           // after the temporary write
		{"close", false, "old"},           // after its fsync
		{"rename", false, "old"},          // after the temporary file is complete
		{"fsync directory", false, "new"}, // after the rename, before the directory fsync
		{"", false, "new"},                // no crash
	}
	for _, tt := range tests {
		name := "crash at " + tt.crashAt
		if tt.torn {
			name += " (torn)"
		}
		if tt.crashAt == "" {
			name = "no crash"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Create(dir, GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			old := snapshotView(t, c.Pin())
			next := New(GenerousCapacity)
			mustDeploy(t, next, weighted("acme", "thumbs", 1))
			mustDeploy(t, next, weighted("globex", "render", 1, 1))
			updated := snapshotView(t, next.Pin())

			fsys := &crashFS{crashAt: tt.crashAt, torn: tt.torn}
			c.store.fs = fsys
			_, err = c.Deploy(weighted("globex", "render", 1, 1))
			if tt.crashAt != "" && !errors.Is(err, errCrash) {
				t.Fatalf("Deploy = %v, want the crash", err)
			}
			if tt.crashAt != "" && c.Generation() != 1 {
				t.Fatal("a change whose write crashed became visible")
			}

			leftovers, _ := filepath.Glob(filepath.Join(dir, tempPattern))
			if wantLeftover := tt.crashAt != "" && tt.crashAt != "create" && tt.want == "old"; wantLeftover != (len(leftovers) == 1) {
				t.Fatalf("temporary files after the crash: %v", leftovers)
			}
			// The process dies: the kernel drops its lock, and nothing it
			// would still write reaches the disk (crashFS refuses it all).
			_ = c.Close()
			reopened, err := Open(dir)
			if err != nil {
				t.Fatalf("after the crash (steps %v) Open = %v", fsys.steps, err)
			}
			defer reopened.Close()
			got := snapshotView(t, reopened.Pin())
			want := old
			if tt.want == "new" {
				want = updated
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("after a crash at %q the store holds generation %d, want the %s one (%d)",
					tt.crashAt, got.Generation, tt.want, want.Generation)
			}
			if stale, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(stale) != 0 {
				t.Fatalf("Open left temporary files: %v", stale)
			}
		})
	}
}

// failOnceFS fails one rename and then works, as a transient error would.
type failOnceFS struct {
	osFS
	failed bool
}

func (f *failOnceFS) Rename(from, to string) error {
	if !f.failed {
		f.failed = true
		return os.ErrPermission
	}
	return f.osFS.Rename(from, to)
}

func TestAFailedStoreWriteIsInvisibleAndSpendsItsGeneration(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	before := c.Pin()
	c.store.fs = &failOnceFS{}
	_, err = c.Deploy(weighted("globex", "render", 1))
	var se *StoreError
	if !errors.As(err, &se) || se.Op != "rename" || !errors.Is(err, os.ErrPermission) {
		t.Fatalf("Deploy = %v, want a rename StoreError", err)
	}
	if c.Pin() != before {
		t.Fatal("a change whose write failed became visible")
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(stale) != 0 {
		t.Fatalf("a failed write left temporary files: %v", stale)
	}
	if g := mustDeploy(t, c, weighted("globex", "render", 1)); g != 3 {
		t.Fatalf("generation after a failed write %d, want 3 (2 is spent)", g)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil || reopened.Generation() != 3 {
		t.Fatalf("reopened: %v, %v", reopened, err)
	}
	_ = reopened.Close()
}

// failSyncDirFS fails every directory fsync with EIO, after the rename has
// put the new store file in place, as a failing disk would.
type failSyncDirFS struct {
	osFS
}

func (failSyncDirFS) SyncDir(string) error { return syscall.EIO }

// TestAFailedDirectoryFsyncIsAFailedChange pins down what doc.go promises
// when the directory fsync after the rename fails: the change returns an
// error and is never published; its generation is spent; the new file may
// be on disk until the catalog's next successful write replaces it.
func TestAFailedDirectoryFsyncIsAFailedChange(t *testing.T) {
	setup := func(t *testing.T) (string, *Catalog, uint64) {
		dir := t.TempDir()
		c, err := Create(dir, GenerousCapacity)
		if err != nil {
			t.Fatal(err)
		}
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		before := c.Pin()
		c.store.fs = failSyncDirFS{}
		spent, err := c.Deploy(weighted("globex", "render", 1))
		var se *StoreError
		if !errors.As(err, &se) || se.Op != "fsync directory" || !errors.Is(err, syscall.EIO) {
			t.Fatalf("Deploy = %v, want a directory fsync StoreError", err)
		}
		if c.Pin() != before || c.Generation() != 1 {
			t.Fatal("a change whose directory fsync failed became visible")
		}
		// The rename happened: the live file system shows the new file.
		data, err := os.ReadFile(filepath.Join(dir, StoreFileName))
		if err != nil {
			t.Fatal(err)
		}
		if _, pin, _, ferr := decodeStore(data); ferr != nil || pin.Generation() != spent {
			t.Fatalf("the store file after the failed fsync: %v %+v", pin, ferr)
		}
		c.store.fs = osFS{}
		return dir, c, spent
	}
	reopen := func(t *testing.T, dir string) *Catalog {
		t.Helper()
		c, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	t.Run("the next change replaces the file with a view without it", func(t *testing.T) {
		dir, c, spent := setup(t)
		g := mustDeploy(t, c, weighted("initech", "jobs", 1))
		if g <= spent {
			t.Fatalf("generation %d after the failure, %d was spent", g, spent)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		r := reopen(t, dir)
		if _, _, ok := r.Pin().Deployment("globex", "render"); ok || r.Generation() != g {
			t.Fatalf("reopened at %d; the failed change present: %v", r.Generation(), ok)
		}
	})
	t.Run("Close replaces the file with the published view", func(t *testing.T) {
		dir, c, spent := setup(t)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		r := reopen(t, dir)
		if _, _, ok := r.Pin().Deployment("globex", "render"); ok || r.Generation() != 1 {
			t.Fatalf("reopened at %d; the failed change present: %v", r.Generation(), ok)
		}
		if g := mustDeploy(t, r, weighted("initech", "jobs", 1)); g <= spent {
			t.Fatalf("generation %d after the restart, %d was spent", g, spent)
		}
	})
	t.Run("a process that dies first may leave the change behind", func(t *testing.T) {
		dir, c, spent := setup(t)
		c.store.fs = &crashFS{crashed: true}
		_ = c.Close() // the kernel drops the lock; nothing more is written
		r := reopen(t, dir)
		if _, g, ok := r.Pin().Deployment("globex", "render"); !ok || g != spent {
			t.Fatalf("the renamed file did not survive a process exit: %d %v", g, ok)
		}
		if g := mustDeploy(t, r, weighted("initech", "jobs", 1)); g <= spent {
			t.Fatalf("generation %d after the restart, %d was spent", g, spent)
		}
	})
}
