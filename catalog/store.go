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
// the store; a crash can leave them behind, and Open removes them.
const tempPattern = StoreFileName + ".tmp-*"

// store binds a catalog to its directory.
type store struct {
	fs  fileSystem
	dir string
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
// needed) at generation 0. It fails with [ErrStoreExists] if dir already
// holds a store.
func Create(dir string, capacity Capacity) (*Catalog, error) {
	return create(osFS{}, dir, capacity)
}

func create(fsys fileSystem, dir string, capacity Capacity) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	exists, err := fsys.Exists(path)
	if err != nil {
		return nil, &StoreError{File: path, Record: -1, Op: "create", Cause: err}
	}
	if exists {
		return nil, &StoreError{File: path, Record: -1, Op: "create", Reason: ErrStoreExists}
	}
	pin := emptyPin(0)
	if err := writeStore(fsys, dir, capacity, pin); err != nil {
		return nil, err
	}
	return newCatalog(capacity, &store{fs: fsys, dir: dir}, pin), nil
}

// Open rebuilds the catalog stored in dir: the same capacity, generation
// counter, deployments and typed policy as when it was written. A
// missing, truncated or damaged store, or one whose content breaks any
// rule, fails with a *[StoreError] naming the file and what failed; Open
// never returns a partial catalog. The returned catalog writes back to
// dir after every change.
func Open(dir string) (*Catalog, error) {
	return open(osFS{}, dir)
}

func open(fsys fileSystem, dir string) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &StoreError{File: path, Record: -1, Op: "open", Reason: ErrStoreMissing, Cause: err}
	}
	if err != nil {
		return nil, &StoreError{File: path, Record: -1, Op: "read", Cause: err}
	}
	capacity, pin, ferr := decodeStore(data)
	if ferr != nil {
		return nil, &StoreError{File: path, Record: ferr.record, Op: "open", Reason: ferr.reason, Detail: ferr.detail}
	}
	// Temporary files are leftovers of writes a crash interrupted; the
	// store file never depends on them.
	if stale, err := fsys.Glob(filepath.Join(dir, tempPattern)); err == nil {
		for _, name := range stale {
			_ = fsys.Remove(name)
		}
	}
	return newCatalog(capacity, &store{fs: fsys, dir: dir}, pin), nil
}

// writeStore replaces the store in dir with the encoding of pin: write a
// temporary file, fsync it, rename it over the store, fsync the directory.
// Before the rename a crash leaves the old store; after it, the new one;
// the fsyncs make the rename durable only once the data it names is.
func writeStore(fsys fileSystem, dir string, capacity Capacity, pin *Pin) error {
	data, err := encodeStore(capacity, pin)
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
