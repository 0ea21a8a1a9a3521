//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris)

package catalog

import (
	"io"
	"os"
	"path/filepath"
	"sync"
)

// heldDirectories is the set of store directories this process holds, by
// resolved absolute path. Without flock(2) the store can exclude only
// openers in its own process; see doc.go, "Store lock".
var heldDirectories = struct {
	mu   sync.Mutex
	dirs map[string]bool // guarded by mu
}{dirs: map[string]bool{}}

// lockDir takes dir for this process without waiting, or returns
// [ErrStoreInUse] when this process already holds it. The lock file is
// still created, so a directory looks the same on every system and a
// directory the process cannot write to fails here as it does elsewhere.
func lockDir(dir string) (io.Closer, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	key, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if resolved, err := filepath.EvalSymlinks(key); err == nil {
		key = resolved
	}
	heldDirectories.mu.Lock()
	defer heldDirectories.mu.Unlock()
	if heldDirectories.dirs[key] {
		return nil, ErrStoreInUse
	}
	heldDirectories.dirs[key] = true
	return &processLock{key: key}, nil
}

type processLock struct {
	once sync.Once
	key  string
}

func (l *processLock) Close() error {
	l.once.Do(func() {
		heldDirectories.mu.Lock()
		delete(heldDirectories.dirs, l.key)
		heldDirectories.mu.Unlock()
	})
	return nil
}
