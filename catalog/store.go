package catalog

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// StoreFileName is the name of the store file inside a store directory.
const StoreFileName = "catalog.store"

// tempPattern names the files a rewrite prepares before renaming one over
// the store; a crash can leave them behind, and whoever next takes the
// directory's lock removes them.
const tempPattern = StoreFileName + ".tmp-*"

// defaultRewriteFloor is the least garbage, in bytes, for which a store
// rewrites itself: below it, a small catalog would rewrite its whole file
// every few changes.
const defaultRewriteFloor = 1 << 20

// store binds a catalog to its directory. fs, dir and rewriteFloor never
// change once the catalog is published (tests set them before they share
// the catalog); the other fields are guarded by the owning Catalog's mu.
type store struct {
	fs   fileSystem
	dir  string
	path string
	// rewriteFloor is the least garbage worth a rewrite (see commitLocked).
	rewriteFloor int64

	// lock is the directory's lock; nil once the catalog is closed.
	lock io.Closer
	// file is the store file, open for appending at end; nil after a
	// failed write, when the next write must rewrite the file whole.
	file storeFile
	// end is the offset after the last commit of file.
	end int64
	// chain is the chain digest of that commit.
	chain [sha256.Size]byte
	// live is the length of the records of the published view's
	// deployments: what a rewrite would write, less its header and commit.
	live int64
	// header is the length of the file's magic, slots and header record.
	header int64
	// slotted says the file has durable-end slots (format 4); slot is the
	// one the next append overwrites.
	slotted bool
	slot    int
	// compaction is the rewrite running outside the lock, if any; only
	// its goroutine clears it.
	compaction *compaction
	// settling is the compaction whose file the store appends to while
	// that compaction fsyncs the directory after its rename, without the
	// lock; settleLocked clears it.
	settling *compaction
}

// fileSystem is the seam between the store and the operating system, so
// tests can stop a write after any step and look at what a crash there
// would leave behind.
type fileSystem interface {
	MkdirAll(dir string) error
	CreateTemp(dir, pattern string) (storeFile, error)
	// OpenFile opens an existing store file for reading and writing.
	OpenFile(name string) (storeFile, error)
	Rename(from, to string) error
	SyncDir(dir string) error
	Remove(name string) error
	// ReadFile is no longer used by the store, which streams its file
	// through OpenRead; it stays for the seams that tests build on.
	ReadFile(name string) ([]byte, error)
	Exists(name string) (bool, error)
	Glob(pattern string) ([]string, error)
	// Lock takes the exclusive lock of a store directory without waiting,
	// or fails with ErrStoreInUse; closing the result releases it.
	Lock(dir string) (io.Closer, error)
	// OpenRead opens an existing file for reading.
	OpenRead(name string) (readerAtCloser, error)
	// Size is the length of an existing file in bytes.
	Size(name string) (int64, error)
}

// readerAtCloser is a file open for reading, Open reads a store through.
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

type storeFile interface {
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Close() error
	Name() string
}

type osFS struct{}

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
func (osFS) CreateTemp(dir, pattern string) (storeFile, error) {
	return os.CreateTemp(dir, pattern)
}
func (osFS) OpenFile(name string) (storeFile, error) { return os.OpenFile(name, os.O_RDWR, 0) }
func (osFS) Rename(from, to string) error            { return os.Rename(from, to) }
func (osFS) Remove(name string) error                { return os.Remove(name) }
func (osFS) ReadFile(name string) ([]byte, error)    { return os.ReadFile(name) }
func (osFS) Glob(pattern string) ([]string, error)   { return filepath.Glob(pattern) }
func (osFS) Lock(dir string) (io.Closer, error)      { return lockDir(dir) }
func (osFS) OpenRead(name string) (readerAtCloser, error) {
	return os.Open(name)
}

func (osFS) Size(name string) (int64, error) {
	info, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

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

func newStore(fsys fileSystem, dir string, lock io.Closer) *store {
	return &store{fs: fsys, dir: dir, path: filepath.Join(dir, StoreFileName), rewriteFloor: defaultRewriteFloor, lock: lock}
}

// Create makes a new, empty store-backed catalog in dir (created if
// needed) at generation 0, holding dir's lock until [Catalog.Close]. It
// fails with [ErrStoreExists] if dir already holds a store, and with
// [ErrStoreInUse] if another open catalog holds dir: of two concurrent
// creators exactly one succeeds, and the other gets one of those two.
// When it returns, the store and every directory entry on the path to it
// are durable, whether Create made dir or found it.
func Create(dir string, capacity Capacity) (*Catalog, error) {
	return create(osFS{}, dir, capacity)
}

func create(fsys fileSystem, dir string, capacity Capacity) (*Catalog, error) {
	path := filepath.Join(dir, StoreFileName)
	if err := makeDirectory(fsys, dir); err != nil {
		return nil, err
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
	s := newStore(fsys, dir, lock)
	pin := emptyPin(0)
	if err := s.rewriteLocked(capacity, pin, 0, 0); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return newCatalog(capacity, s, pin), nil
}

// Open rebuilds the catalog stored in dir: the same capacity, generation
// counter, deployments and typed policy as at its last commit. It holds
// dir's lock until [Catalog.Close], and fails with [ErrStoreInUse],
// touching nothing, while another open catalog holds it. A change whose
// append was cut short by a crash (a torn tail) is dropped and cut off
// the file; zeros or an end before the byte up to which the file was
// durable are damage. A format 3 store opens too, and becomes format 4
// at its first rewrite. A missing, truncated or damaged store, or one whose
// content breaks any rule, fails with a *[StoreError] naming the file and
// what failed; Open never returns a partial catalog, and refuses a file
// over the maximum store size (1 GiB) before reading it. It reads the file
// once, as a stream, and fsyncs the file, the directory and every
// directory above it before it returns, so nothing it serves can be lost to a power loss. The returned
// catalog appends to the store after every change.
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
// removes the temporary files of interrupted rewrites, cuts off a torn
// tail.
func readLocked(fsys fileSystem, dir string, lock io.Closer) (*Catalog, error) {
	s := newStore(fsys, dir, lock)
	size, err := fsys.Size(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &StoreError{File: s.path, Record: -1, Op: "open", Reason: ErrStoreMissing, Cause: err}
	}
	if err != nil {
		return nil, &StoreError{File: s.path, Record: -1, Op: "read", Cause: err}
	}
	if size > maxStoreBytes {
		return nil, &StoreError{File: s.path, Record: -1, Op: "open", Reason: ErrMalformed, Detail: "larger than the maximum store size"}
	}
	r, err := fsys.OpenRead(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &StoreError{File: s.path, Record: -1, Op: "open", Reason: ErrStoreMissing, Cause: err}
	}
	if err != nil {
		return nil, &StoreError{File: s.path, Record: -1, Op: "read", Cause: err}
	}
	dec, ferr, err := readStore(r, size)
	_ = r.Close()
	if err != nil {
		return nil, &StoreError{File: s.path, Record: -1, Op: "read", Cause: err}
	}
	if ferr != nil {
		return nil, &StoreError{File: s.path, Record: ferr.record, Op: "open", Reason: ferr.reason, Detail: ferr.detail}
	}
	removeTemporaryFiles(fsys, dir)
	var live int64
	dec.pin.index.each(func(d *deployment) { live += deploymentBytes(d) })
	if err := s.adoptLocked(dec, size, live); err != nil {
		return nil, err
	}
	c := newCatalog(dec.capacity, s, dec.pin)
	c.issued, c.persisted = dec.issued, dec.issued
	return c, nil
}

// adoptLocked opens the store file that dec was read from, size bytes
// long, for appending, after cutting off its torn tail if it has one. It
// makes the file, its entry in the directory, and the path to the
// directory (see syncAncestors) durable before the catalog serves anything
// from it: what was read may be only in the page
// cache (a process killed between an append's write and its fsync, or
// between a rewrite's rename and its directory fsync, leaves it so), and
// a view served from there, then lost to a power loss, would let the next
// process hand out its generation again for other content.
func (s *store) adoptLocked(dec *decodedStore, size, live int64) error {
	f, err := s.fs.OpenFile(s.path)
	if err != nil {
		return &StoreError{File: s.path, Record: -1, Op: "open", Cause: err}
	}
	if end := int64(dec.end); end < size {
		if err := f.Truncate(end); err != nil {
			_ = f.Close()
			return &StoreError{File: s.path, Record: -1, Op: "truncate torn tail", Cause: err}
		}
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return &StoreError{File: s.path, Record: -1, Op: "fsync", Cause: err}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		_ = f.Close()
		return &StoreError{File: s.dir, Record: -1, Op: "fsync directory", Cause: err}
	}
	if err := syncAncestors(s.fs, s.dir); err != nil {
		_ = f.Close()
		return err
	}
	s.file, s.end, s.chain, s.live = f, int64(dec.end), dec.chain, live
	s.header = headerBytes(dec.version, dec.capacity)
	s.slotted, s.slot = dec.version == storeVersion, 0
	return nil
}

// makeDirectory creates dir and any parent of it that is missing, then
// makes the path to it durable (see syncAncestors), so that once a store
// file in dir is durable, so is the path to it: a power loss cannot take an
// acknowledged store away by losing a directory entry above it. That
// holds for a directory that already existed too: an installer's mkdir,
// or a Create killed after making dir, may have left its entry, or one
// above it, in the page cache only.
func makeDirectory(fsys fileSystem, dir string) error {
	if err := fsys.MkdirAll(dir); err != nil {
		return &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	return syncAncestors(fsys, dir)
}

// syncAncestors fsyncs the parent of dir and every directory above it, up
// to the root, deepest first: each fsync makes durable an entry in a
// directory whose own entry the next one makes durable. Create and Open
// call it before they return, so the store directory's entry, and each
// one above it, is as durable as the store. A directory above the parent
// that the process may search but not read (a traverse-only home, say)
// cannot be opened to be fsynced; it is skipped, since such a directory is
// one an administrator set up, not one an installer just made.
func syncAncestors(fsys fileSystem, dir string) error {
	d, err := filepath.Abs(dir)
	if err != nil {
		return &StoreError{File: dir, Record: -1, Op: "fsync directory", Cause: err}
	}
	for parent, first := filepath.Dir(d), true; parent != d; d, parent, first = parent, filepath.Dir(parent), false {
		if err := fsys.SyncDir(parent); err != nil && (first || !errors.Is(err, fs.ErrPermission)) {
			return &StoreError{File: parent, Record: -1, Op: "fsync directory", Cause: err}
		}
	}
	return nil
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

// removeTemporaryFiles removes what interrupted rewrites left in dir. The
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
// Close first rewrites the store from the current view, so that the
// directory holds what the catalog's pins show and the highest generation
// it handed out (see the package documentation, "Failed writes"); an
// error from that write is returned, and the lock is released all the
// same. After Close, [Catalog.Deploy], [Catalog.Delete] and
// [Catalog.Apply] fail with [ErrClosed]; pins and [Catalog.Pin] keep
// working. Close is idempotent: later calls return nil. Closing an
// in-memory catalog only stops its changes.
func (c *Catalog) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.store
	if s == nil {
		c.mu.Unlock()
		return nil
	}
	// A compaction in flight sees closed and discards its work; it needs
	// the mutex to finish, and must finish before the lock is released.
	if comp := s.compaction; comp != nil {
		c.mu.Unlock()
		<-comp.done
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	// A failed directory fsync of a compaction drops the file: rewrite.
	_ = s.settleLocked()
	var err error
	if c.issued > c.persisted || s.file == nil {
		if err = s.rewriteLocked(c.capacity, c.current.Load(), c.issued, s.live); err == nil {
			c.persisted = c.issued
		}
	}
	if s.file != nil {
		if cerr := s.file.Close(); cerr != nil && err == nil {
			err = &StoreError{File: s.path, Record: -1, Op: "close", Cause: cerr}
		}
		s.file = nil
	}
	if cerr := s.lock.Close(); cerr != nil && err == nil {
		err = &StoreError{File: filepath.Join(s.dir, lockFileName), Record: -1, Op: "unlock", Cause: cerr}
	}
	s.lock = nil
	return err
}

// WriteStore writes the current view to a store in dir (created if
// needed), replacing any store there atomically with a compact one, and
// records the highest generation the catalog has handed out, so a catalog
// opened from it never hands one out again. It does not bind the catalog
// to dir; [Open] does. It takes dir's lock for the write and fails with
// [ErrStoreInUse] while another open catalog holds it; when dir is the
// open catalog's own directory it rewrites that store under the lock the
// catalog holds.
func (c *Catalog) WriteStore(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.store; s != nil && !c.closed && sameDirectory(s.dir, dir) {
		if err := s.rewriteLocked(c.capacity, c.current.Load(), c.issued, s.live); err != nil {
			return err
		}
		c.persisted = c.issued
		return nil
	}
	fsys := osFS{}
	if err := makeDirectory(fsys, dir); err != nil {
		return err
	}
	lock, err := lockStore(fsys, dir, "write")
	if err != nil {
		return err
	}
	removeTemporaryFiles(fsys, dir)
	err = writeSnapshot(fsys, dir, c.capacity, c.current.Load(), c.issued)
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

// writeSnapshot replaces the store in dir, whose lock the caller holds,
// with a compact store of pin and issued.
func writeSnapshot(fsys fileSystem, dir string, capacity Capacity, pin *Pin, issued uint64) error {
	data, _, err := encodeSnapshot(capacity, pin, issued)
	if err != nil {
		return encodeFailure(dir, err)
	}
	f, err := replaceStoreFile(fsys, dir, data)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return &StoreError{File: filepath.Join(dir, StoreFileName), Record: -1, Op: "close", Cause: err}
	}
	return nil
}

// replaceStoreFile replaces the store file in dir with data: write a
// temporary file, fsync it, rename it over the store, fsync the directory.
// Before the rename a crash leaves the old store; after it, the new one;
// the fsyncs make the rename durable only once the data it names is. It
// returns the new store file, still open. The caller holds dir's lock.
func replaceStoreFile(fsys fileSystem, dir string, data []byte) (storeFile, error) {
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, &StoreError{File: dir, Record: -1, Op: "create directory", Cause: err}
	}
	f, err := fsys.CreateTemp(dir, tempPattern)
	if err != nil {
		return nil, &StoreError{File: dir, Record: -1, Op: "create temporary file", Cause: err}
	}
	tmp := f.Name()
	fail := func(op string, cause error) (storeFile, error) {
		_ = f.Close()
		_ = fsys.Remove(tmp)
		return nil, &StoreError{File: tmp, Record: -1, Op: op, Cause: cause}
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fail("write", err)
	}
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	path := filepath.Join(dir, StoreFileName)
	if err := fsys.Rename(tmp, path); err != nil {
		return fail("rename", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		_ = f.Close()
		return nil, &StoreError{File: dir, Record: -1, Op: "fsync directory", Cause: err}
	}
	return f, nil
}

// encodeFailure is the error for a view or change that the store format
// cannot hold. It is never worth retrying: the same change fails the same
// way. It happens before anything is written.
func encodeFailure(file string, err error) error {
	reason := ErrInvalidDeployment
	if errors.Is(err, errStoreTooLarge) {
		reason = ErrCapacityExceeded
	}
	return &StoreError{File: file, Record: -1, Op: "encode", Reason: reason, Cause: err}
}

// isEncodeFailure reports whether err is an encodeFailure.
func isEncodeFailure(err error) bool {
	var se *StoreError
	return errors.As(err, &se) && se.Op == "encode"
}

// rewriteLocked replaces the store file with a compact one holding pin,
// whose deployments' records take live bytes, and issued, and appends to
// it from then on. After a failure the store has no file to append to, so
// the next write rewrites again; a failure to encode writes nothing and
// keeps the file.
func (s *store) rewriteLocked(capacity Capacity, pin *Pin, issued uint64, live int64) error {
	data, chain, err := encodeSnapshot(capacity, pin, issued)
	if err != nil {
		return encodeFailure(s.path, err)
	}
	_ = s.settleLocked() // the file is replaced whatever came of it
	s.dropFileLocked()
	f, err := replaceStoreFile(s.fs, s.dir, data)
	if err != nil {
		return err
	}
	s.file, s.end, s.chain, s.live = f, int64(len(data)), chain, live
	s.header = headerBytes(storeVersion, capacity)
	s.slotted, s.slot = true, 0
	return nil
}

// dropFileLocked closes the file the store appends to, if any: after a
// failed write its content past the last commit is unknown, so the next
// write rewrites the store instead of appending to it. A compaction in
// flight would replace a file the store no longer trusts, or one a
// rewrite has replaced already, so it is abandoned.
func (s *store) dropFileLocked() {
	if s.file != nil {
		_ = s.file.Close()
		s.file = nil
	}
	if s.compaction != nil {
		s.compaction.abandoned = true
	}
}
