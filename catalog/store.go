package catalog

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// StoreFileName is the name of the store file inside a store directory.
const StoreFileName = "catalog.store"

// tempPattern names the files a write prepares before renaming one over
// the store; a crash can leave them behind, and whoever next takes the
// directory's lock removes them.
const tempPattern = StoreFileName + ".tmp-*"

// store binds a catalog to its directory. fs and dir never change once
// the catalog is published (tests swap fs before they share the catalog);
// lock is guarded by the owning Catalog's mu and is nil once the catalog
// is closed.
type store struct {
	fs   fileSystem
	dir  string
	lock io.Closer
}

// fileSystem is the seam between the store and the operating system, so
// tests can stop a write after any step and look at what a crash there
// would leave behind.
type fileSystem interface {
	MkdirAll(dir string) error
	CreateTemp(dir, pattern string) (tempFile, error)
	Rename(from, to string) error
	SyncDir(dir string) error
	Remove(name string) error
	ReadFile(name string) ([]byte, error)
	Exists(name string) (bool, error)
	Glob(pattern string) ([]string, error)
	// Lock takes the exclusive lock of a store directory without waiting,
	// or fails with ErrStoreInUse; closing the result releases it.
	Lock(dir string) (io.Closer, error)
}

type tempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

type osFS struct{}

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
func (osFS) CreateTemp(dir, pattern string) (tempFile, error) {
	return os.CreateTemp(dir, pattern)
}
func (osFS) Rename(from, to string) error          { return os.Rename(from, to) }
func (osFS) Remove(name string) error              { return os.Remove(name) }
func (osFS) ReadFile(name string) ([]byte, error)  { return os.ReadFile(name) }
func (osFS) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }
func (osFS) Lock(dir string) (io.Closer, error)    { return lockDir(dir) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func (osFS) Exists(name string) (bool, error) {
	_, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Create makes a new, empty store-backed catalog in dir (created if
// needed) at generation 0, holding dir's lock until [Catalog.Close]. It
// fails with [ErrStoreExists] if dir already holds a store, and with
// [ErrStoreInUse] if another open catalog holds dir: of two concurrent
// creators exactly one succeeds, and the other gets one of those two.
func Create(dir string, capacity Capacity) (*Catalog, error) {
	return create(osFS{}, dir, capacity)
}

func create(fsys fileSystem, dir string, capacity Capacity) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	lock, err := lockStore(fsys, dir, "create")
	if err != nil {
		return nil, err
	}
	// From here on no other catalog can create, open or write this store,
	// so the existence check and the first write are one step to them.
	exists, err := fsys.Exists(path)
	if err != nil {
		_ = lock.Close()
		return nil, &StoreError{File: path, Record: -1, Op: "create", Cause: err}
	}
	if exists {
		_ = lock.Close()
		return nil, &StoreError{File: path, Record: -1, Op: "create", Reason: ErrStoreExists}
	}
	removeTemporaryFiles(fsys, dir)
	pin := emptyPin(0)
	if err := writeStore(fsys, dir, capacity, pin, 0); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return newCatalog(capacity, &store{fs: fsys, dir: dir, lock: lock}, pin), nil
}

// Open rebuilds the catalog stored in dir: the same capacity, generation
// counter, deployments and typed policy as when it was written. It holds
// dir's lock until [Catalog.Close], and fails with [ErrStoreInUse],
// touching nothing, while another open catalog holds it. A missing,
// truncated or damaged store, or one whose content breaks any rule, fails
// with a *[StoreError] naming the file and what failed; Open never returns
// a partial catalog. The returned catalog writes back to dir after every
// change.
func Open(dir string) (*Catalog, error) {
	return open(osFS{}, dir)
}

func open(fsys fileSystem, dir string) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	// Looking before locking keeps Open from leaving a lock file in a
	// directory that holds no store; the read below, under the lock, is
	// the one that counts.
	switch exists, err := fsys.Exists(path); {
	case err != nil:
		return nil, &StoreError{File: path, Record: -1, Op: "open", Cause: err}
	case !exists:
		return nil, &StoreError{File: path, Record: -1, Op: "open", Reason: ErrStoreMissing, Cause: fs.ErrNotExist}
	}
	lock, err := lockStore(fsys, dir, "open")
	if err != nil {
		return nil, err
	}
	c, err := readLocked(fsys, dir, lock)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	return c, nil
}

// readLocked reads the store in dir, whose lock the caller holds as lock,
// and removes the temporary files of interrupted writes.
func readLocked(fsys fileSystem, dir string, lock io.Closer) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &StoreError{File: path, Record: -1, Op: "open", Reason: ErrStoreMissing, Cause: err}
	}
	if err != nil {
		return nil, &StoreError{File: path, Record: -1, Op: "read", Cause: err}
	}
	capacity, pin, issued, ferr := decodeStore(data)
	if ferr != nil {
		return nil, &StoreError{File: path, Record: ferr.record, Op: "open", Reason: ferr.reason, Detail: ferr.detail}
	}
	removeTemporaryFiles(fsys, dir)
	c := newCatalog(capacity, &store{fs: fsys, dir: dir, lock: lock}, pin)
	c.issued, c.persisted = issued, issued
	return c, nil
}

// lockStore takes dir's lock for op, as a *StoreError on failure.
func lockStore(fsys fileSystem, dir, op string) (io.Closer, error) {
	lock, err := fsys.Lock(dir)
	switch {
	case errors.Is(err, ErrStoreInUse):
		return nil, &StoreError{File: dir, Record: -1, Op: op, Reason: ErrStoreInUse}
	case errors.Is(err, fs.ErrNotExist) && op == "open":
		return nil, &StoreError{File: filepath.Join(dir, StoreFileName), Record: -1, Op: op, Reason: ErrStoreMissing, Cause: err}
	case err != nil:
		return nil, &StoreError{File: filepath.Join(dir, lockFileName), Record: -1, Op: "lock", Cause: err}
	}
	return lock, nil
}

// removeTemporaryFiles removes what interrupted writes left in dir. The
// caller holds dir's lock, so no write is in progress there: every such
// file is a leftover, and the store file never depends on one.
func removeTemporaryFiles(fsys fileSystem, dir string) {
	if stale, err := fsys.Glob(filepath.Join(dir, tempPattern)); err == nil {
		for _, name := range stale {
			_ = fsys.Remove(name)
		}
	}
}

// Close releases the store directory's lock, after which another catalog
// may open it. If a store write failed since the last one that succeeded,
// Close first writes the current view once more, so that the directory
// holds what the catalog's pins show and the highest generation it handed
// out (see the package documentation, "Failed writes"); an error from that
// write is returned, and the lock is released all the same. After Close,
// [Catalog.Deploy] and [Catalog.Delete] fail with [ErrClosed]; pins and
// [Catalog.Pin] keep working. Close is idempotent: later calls return nil.
// Closing an in-memory catalog only stops its changes.
func (c *Catalog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.store == nil {
		return nil
	}
	var err error
	if c.issued > c.persisted {
		if err = writeStore(c.store.fs, c.store.dir, c.capacity, c.current.Load(), c.issued); err == nil {
			c.persisted = c.issued
		}
	}
	if cerr := c.store.lock.Close(); cerr != nil && err == nil {
		err = &StoreError{File: filepath.Join(c.store.dir, lockFileName), Record: -1, Op: "unlock", Cause: cerr}
	}
	c.store.lock = nil
	return err
}

// WriteStore writes the current view to a store in dir (created if
// needed), replacing any store there atomically, and records the highest
// generation the catalog has handed out, so a catalog opened from it never
// hands one out again. It does not bind the catalog to dir; [Open] does.
// It takes dir's lock for the write and fails with [ErrStoreInUse] while
// another open catalog holds it; when dir is the open catalog's own
// directory it writes under the lock the catalog holds.
func (c *Catalog) WriteStore(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store != nil && !c.closed && sameDirectory(c.store.dir, dir) {
		if err := writeStore(c.store.fs, c.store.dir, c.capacity, c.current.Load(), c.issued); err != nil {
			return err
		}
		c.persisted = c.issued
		return nil
	}
	fsys := osFS{}
	if err := fsys.MkdirAll(dir); err != nil {
		return &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	lock, err := lockStore(fsys, dir, "write")
	if err != nil {
		return err
	}
	removeTemporaryFiles(fsys, dir)
	err = writeStore(fsys, dir, c.capacity, c.current.Load(), c.issued)
	if cerr := lock.Close(); cerr != nil && err == nil {
		err = &StoreError{File: filepath.Join(dir, lockFileName), Record: -1, Op: "unlock", Cause: cerr}
	}
	return err
}

// sameDirectory reports whether a and b name one existing directory.
func sameDirectory(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}

// writeStore replaces the store in dir with the encoding of pin and the
// issued high-water mark: write a temporary file, fsync it, rename it over
// the store, fsync the directory. Before the rename a crash leaves the old
// store; after it, the new one; the fsyncs make the rename durable only
// once the data it names is. The caller holds dir's lock.
func writeStore(fsys fileSystem, dir string, capacity Capacity, pin *Pin, issued uint64) error {
	data, err := encodeStore(capacity, pin, issued)
	if err != nil {
		return &StoreError{File: dir, Record: -1, Op: "encode", Cause: err}
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	f, err := fsys.CreateTemp(dir, tempPattern)
	if err != nil {
		return &StoreError{File: dir, Record: -1, Op: "create temporary file", Cause: err}
	}
	tmp := f.Name()
	fail := func(op string, cause error) error {
		_ = fsys.Remove(tmp)
		return &StoreError{File: tmp, Record: -1, Op: op, Cause: cause}
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fail("fsync", err)
	}
	if err := f.Close(); err != nil {
		return fail("close", err)
	}
	path := filepath.Join(dir, StoreFileName)
	if err := fsys.Rename(tmp, path); err != nil {
		return fail("rename", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return &StoreError{File: dir, Record: -1, Op: "fsync directory", Cause: err}
	}
	return nil
}
