package catalog

import "errors"

var errCrash = errors.New("simulated crash")

// useFS makes c's store go through fsys from now on, the file it appends
// to included. The test holds c to itself.
func useFS(c *Catalog, fsys interface {
	fileSystem
	wrap(storeFile) storeFile
}) {
	c.store.fs = fsys
	if c.store.file != nil {
		c.store.file = fsys.wrap(c.store.file)
	}
}

// forceRewrite makes c's next write rewrite its store instead of
// appending, as it does after a failed write.
func forceRewrite(c *Catalog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store.dropFileLocked()
}

// faultFS performs real file operations, each named step through a
// counter, and fails those named in fail with the paired error, once each
// unless sticky.
type faultFS struct {
	osFS
	fail   map[string]error
	sticky bool
	steps  []string
}

func (f *faultFS) step(name string) error {
	f.steps = append(f.steps, name)
	if err, ok := f.fail[name]; ok {
		if !f.sticky {
			delete(f.fail, name)
		}
		return err
	}
	return nil
}

func (f *faultFS) wrap(file storeFile) storeFile { return &faultFile{storeFile: file, fs: f} }

func (f *faultFS) CreateTemp(dir, pattern string) (storeFile, error) {
	if err := f.step("create"); err != nil {
		return nil, err
	}
	file, err := f.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f.wrap(file), nil
}

func (f *faultFS) OpenFile(name string) (storeFile, error) {
	file, err := f.osFS.OpenFile(name)
	if err != nil {
		return nil, err
	}
	return f.wrap(file), nil
}

func (f *faultFS) Rename(from, to string) error {
	if err := f.step("rename"); err != nil {
		return err
	}
	return f.osFS.Rename(from, to)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.step("fsync directory"); err != nil {
		return err
	}
	return f.osFS.SyncDir(dir)
}

type faultFile struct {
	storeFile
	fs *faultFS
}

func (c *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := c.fs.step("write"); err != nil {
		return 0, err
	}
	return c.storeFile.WriteAt(p, off)
}

func (c *faultFile) Sync() error {
	if err := c.fs.step("fsync"); err != nil {
		return err
	}
	return c.storeFile.Sync()
}

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

func (f *crashFS) wrap(file storeFile) storeFile { return &crashFile{storeFile: file, fs: f} }

func (f *crashFS) CreateTemp(dir, pattern string) (storeFile, error) {
	if err := f.step("create"); err != nil {
		return nil, err
	}
	file, err := f.osFS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return f.wrap(file), nil
}

func (f *crashFS) OpenFile(name string) (storeFile, error) {
	if err := f.step("open"); err != nil {
		return nil, err
	}
	file, err := f.osFS.OpenFile(name)
	if err != nil {
		return nil, err
	}
	return f.wrap(file), nil
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
	storeFile
	fs *crashFS
}

func (c *crashFile) WriteAt(p []byte, off int64) (int, error) {
	if c.fs.crashAt == "write" && c.fs.torn && !c.fs.crashed {
		n, _ := c.storeFile.WriteAt(p[:len(p)/2], off)
		_ = c.fs.step("write")
		return n, errCrash
	}
	if err := c.fs.step("write"); err != nil {
		return 0, err
	}
	return c.storeFile.WriteAt(p, off)
}

func (c *crashFile) Sync() error {
	if err := c.fs.step("fsync"); err != nil {
		return err
	}
	return c.storeFile.Sync()
}

func (c *crashFile) Truncate(size int64) error {
	if err := c.fs.step("truncate"); err != nil {
		return err
	}
	return c.storeFile.Truncate(size)
}

func (c *crashFile) Close() error {
	err := c.fs.step("close")
	// The descriptor is released even in a crash: the kernel does that.
	if cerr := c.storeFile.Close(); err == nil {
		err = cerr
	}
	return err
}

// failSyncDirFS fails every directory fsync with err, after the rename
// has put the new store file in place, as a failing disk would.
type failSyncDirFS struct {
	osFS
	err error
}

func (f failSyncDirFS) wrap(file storeFile) storeFile { return file }
func (f failSyncDirFS) SyncDir(string) error          { return f.err }

// waitForCompaction waits until no compaction of c's store is in flight,
// its directory fsync after the rename included.
func waitForCompaction(c *Catalog) {
	for {
		c.mu.Lock()
		comp, settling := c.store.compaction, c.store.settling
		c.mu.Unlock()
		if comp == nil {
			if settling != nil {
				<-settling.done // its directory fsync
			}
			return
		}
		<-comp.done
	}
}
