package catalog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// TestCrashDuringAStoreWriteLeavesTheOldOrTheNewGeneration stops a deploy
// at every step of an append and of a rewrite, as a process death there
// would, and reopens the store.
func TestCrashDuringAStoreWriteLeavesTheOldOrTheNewGeneration(t *testing.T) {
	tests := []struct {
		rewrite bool
		crashAt string
		torn    bool
		want    string // "old" or "new"
	}{
		{false, "write", true, "old"},  // a torn append
		{false, "write", false, "old"}, // nothing appended
		{false, "fsync", false, "new"}, // appended, never synced: the process died, the kernel kept it
		{false, "", false, "new"},
		{true, "create", false, "old"},
		{true, "write", true, "old"},            // a torn temporary file
		{true, "write", false, "old"},           // nothing written
		{true, "fsync", false, "old"},           // after the temporary write
		{true, "rename", false, "old"},          // after the temporary file is complete
		{true, "fsync directory", false, "new"}, // after the rename, before the directory fsync
		{true, "", false, "new"},
	}
	for _, tt := range tests {
		name := "append"
		if tt.rewrite {
			name = "rewrite"
		}
		switch {
		case tt.crashAt == "":
			name += "/no crash"
		case tt.torn:
			name += "/crash at " + tt.crashAt + " (torn)"
		default:
			name += "/crash at " + tt.crashAt
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

			if tt.rewrite {
				forceRewrite(c)
			}
			fsys := &crashFS{crashAt: tt.crashAt, torn: tt.torn}
			useFS(c, fsys)
			_, err = c.Deploy(weighted("globex", "render", 1, 1))
			if tt.crashAt != "" && !errors.Is(err, errCrash) {
				t.Fatalf("Deploy = %v, want the crash", err)
			}
			if tt.crashAt == "" && err != nil {
				t.Fatal(err)
			}
			if tt.crashAt != "" && c.Generation() != 1 {
				t.Fatal("a change whose write crashed became visible")
			}

			leftovers, _ := filepath.Glob(filepath.Join(dir, tempPattern))
			wantLeftover := tt.rewrite && tt.crashAt != "" && tt.crashAt != "create" && tt.want == "old"
			if wantLeftover != (len(leftovers) == 1) {
				t.Fatalf("temporary files after the crash: %v", leftovers)
			}
			// The process dies: the kernel drops its lock, and nothing it
			// would still write reaches the disk (crashFS refuses it all).
			if tt.crashAt == "" {
				fsys.crashed = true
			}
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
			// The reopened store takes further changes where it stopped.
			g := mustDeploy(t, reopened, weighted("initech", "jobs", 1))
			if err := reopened.Close(); err != nil {
				t.Fatal(err)
			}
			again, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if _, got, ok := again.Pin().Deployment("initech", "jobs"); !ok || got != g {
				t.Fatalf("the deploy after the crash: generation %d, present %v", got, ok)
			}
		})
	}
}

func TestAFailedStoreWriteIsInvisibleAndSpendsItsGeneration(t *testing.T) {
	for _, step := range []string{"write", "fsync", "create", "rename"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Create(dir, GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			before := c.Pin()
			if step == "create" || step == "rename" {
				forceRewrite(c)
			}
			useFS(c, &faultFS{fail: map[string]error{step: os.ErrPermission}})
			_, err = c.Deploy(weighted("globex", "render", 1))
			var se *StoreError
			if !errors.As(err, &se) || se.Op != step && !(step == "create" && se.Op == "create temporary file") || !errors.Is(err, os.ErrPermission) {
				t.Fatalf("Deploy = %v, want a %s StoreError", err, step)
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
			if err != nil || reopened.Generation() != 3 || reopened.Pin().Len() != 2 {
				t.Fatalf("reopened: %v, %v", reopened, err)
			}
			_ = reopened.Close()
		})
	}
}

// TestAFailedDirectoryFsyncIsAFailedChange pins down what doc.go promises
// when the directory fsync after a rewrite's rename fails: the change
// returns an error and is never published; its generation is spent; the
// new file may be on disk until the catalog's next successful write
// replaces it. A failed fsync of an append leaves the same uncertainty.
func TestAFailedDirectoryFsyncIsAFailedChange(t *testing.T) {
	for _, mode := range []string{"fsync directory", "fsync"} {
		setup := func(t *testing.T) (string, *Catalog, uint64) {
			dir := t.TempDir()
			c, err := Create(dir, GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			before := c.Pin()
			if mode == "fsync directory" {
				forceRewrite(c)
				useFS(c, failSyncDirFS{err: syscall.EIO})
			} else {
				useFS(c, &faultFS{fail: map[string]error{"fsync": syscall.EIO}})
			}
			spent, err := c.Deploy(weighted("globex", "render", 1))
			var se *StoreError
			if !errors.As(err, &se) || se.Op != mode || !errors.Is(err, syscall.EIO) {
				t.Fatalf("Deploy = %v, want a %s StoreError", err, mode)
			}
			if c.Pin() != before || c.Generation() != 1 {
				t.Fatal("a change whose fsync failed became visible")
			}
			// The write happened: the live file system shows the change.
			data, err := os.ReadFile(filepath.Join(dir, StoreFileName))
			if err != nil {
				t.Fatal(err)
			}
			if dec, ferr := decodeStore(data); ferr != nil || dec.pin.Generation() != spent {
				t.Fatalf("the store file after the failed fsync: %+v %+v", dec, ferr)
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
		t.Run(mode+"/the next change replaces the file with a view without it", func(t *testing.T) {
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
		t.Run(mode+"/Close replaces the file with the published view", func(t *testing.T) {
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
		t.Run(mode+"/a process that dies first may leave the change behind", func(t *testing.T) {
			dir, c, spent := setup(t)
			useFS(c, &crashFS{crashed: true})
			_ = c.Close() // the kernel drops the lock; nothing more is written
			r := reopen(t, dir)
			if _, g, ok := r.Pin().Deployment("globex", "render"); !ok || g != spent {
				t.Fatalf("the written change did not survive a process exit: %d %v", g, ok)
			}
			if g := mustDeploy(t, r, weighted("initech", "jobs", 1)); g <= spent {
				t.Fatalf("generation %d after the restart, %d was spent", g, spent)
			}
		})
	}
}
