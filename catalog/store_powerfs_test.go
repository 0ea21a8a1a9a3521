package catalog

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// powerFS is an in-memory file system that can lose power. Every file
// keeps its bytes as of its last fsync next to its current ones, and every
// directory its entries as of its last fsync next to its current ones; a
// power-loss image keeps only what was made durable, and drops or tears
// the rest. After every change it makes, it calls checkpoint, if set, so a
// test can take images at every step of an append, a compaction or an
// Apply. With killAt set, the process dies at that step: it and every
// later step fail, and the page cache (the current state) stays.
type powerFS struct {
	checkpoint func(*powerFS)
	killAt     int
	// beforeSync, when set, runs before a file is fsynced, without mu;
	// first says whether it is the file's first fsync.
	beforeSync func(name string, first bool)
	// onSyncDir and onClose, when set, run when a directory is fsynced
	// and when a file handle is closed, without mu.
	onSyncDir func(dir string)
	onClose   func(h *powerHandle)

	mu    sync.Mutex // the compaction goroutine uses the file system too
	root  *powerDir
	steps int
	temps int
}

type powerFile struct {
	data, synced []byte
	everSynced   bool
}

type powerDir struct {
	entries, synced map[string]any // *powerFile or *powerDir
}

func newPowerDir() *powerDir {
	return &powerDir{entries: map[string]any{}, synced: map[string]any{}}
}

func newPowerFS() *powerFS { return &powerFS{root: newPowerDir()} }

func splitPath(name string) []string {
	return strings.Split(strings.Trim(filepath.Clean(name), "/"), "/")
}

// lookupLocked returns the entry at name and its directory, or nil.
func (p *powerFS) lookupLocked(name string) (entry any, parent *powerDir, base string) {
	parts := splitPath(name)
	d := p.root
	for _, part := range parts[:len(parts)-1] {
		next, ok := d.entries[part].(*powerDir)
		if !ok {
			return nil, nil, ""
		}
		d = next
	}
	base = parts[len(parts)-1]
	return d.entries[base], d, base
}

// stepLocked counts a change; it fails once the process is dead.
func (p *powerFS) stepLocked() error {
	p.steps++
	if p.killAt > 0 && p.steps >= p.killAt {
		return errCrash
	}
	return nil
}

// changed runs the checkpoint after a change, outside p.mu.
func (p *powerFS) changed() {
	if p.checkpoint != nil {
		p.checkpoint(p)
	}
}

func (p *powerFS) MkdirAll(dir string) error {
	p.mu.Lock()
	if err := p.stepLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	d := p.root
	for _, part := range splitPath(dir) {
		switch next := d.entries[part].(type) {
		case *powerDir:
			d = next
		case nil:
			nd := newPowerDir()
			d.entries[part] = nd
			d = nd
		default:
			p.mu.Unlock()
			return fs.ErrExist
		}
	}
	p.mu.Unlock()
	p.changed()
	return nil
}

func (p *powerFS) CreateTemp(dir, pattern string) (storeFile, error) {
	p.mu.Lock()
	if err := p.stepLocked(); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	d, ok := p.root, true
	if dir != "/" {
		var e any
		e, _, _ = p.lookupLocked(dir)
		d, ok = e.(*powerDir)
	}
	if !ok {
		p.mu.Unlock()
		return nil, fs.ErrNotExist
	}
	p.temps++
	base := strings.Replace(pattern, "*", fmt.Sprint(p.temps), 1)
	f := &powerFile{}
	d.entries[base] = f
	p.mu.Unlock()
	p.changed()
	return &powerHandle{fs: p, file: f, name: filepath.Join(dir, base)}, nil
}

func (p *powerFS) OpenFile(name string) (storeFile, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.fileLocked(name)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return &powerHandle{fs: p, file: f, name: name}, nil
}

func (p *powerFS) fileLocked(name string) (*powerFile, bool) {
	e, _, _ := p.lookupLocked(name)
	f, ok := e.(*powerFile)
	return f, ok
}

func (p *powerFS) Rename(from, to string) error {
	p.mu.Lock()
	if err := p.stepLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	e, fromDir, fromBase := p.lookupLocked(from)
	_, toDir, toBase := p.lookupLocked(to)
	if e == nil || toDir == nil {
		p.mu.Unlock()
		return fs.ErrNotExist
	}
	delete(fromDir.entries, fromBase)
	toDir.entries[toBase] = e
	p.mu.Unlock()
	p.changed()
	return nil
}

func (p *powerFS) SyncDir(dir string) error {
	if p.onSyncDir != nil {
		p.onSyncDir(dir)
	}
	p.mu.Lock()
	if err := p.stepLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	d := p.root
	if e, _, _ := p.lookupLocked(dir); e != nil {
		d, _ = e.(*powerDir)
	}
	if d == nil {
		p.mu.Unlock()
		return fs.ErrNotExist
	}
	d.synced = maps.Clone(d.entries)
	p.mu.Unlock()
	p.changed()
	return nil
}

func (p *powerFS) Remove(name string) error {
	p.mu.Lock()
	if err := p.stepLocked(); err != nil {
		p.mu.Unlock()
		return err
	}
	e, d, base := p.lookupLocked(name)
	if e == nil {
		p.mu.Unlock()
		return fs.ErrNotExist
	}
	delete(d.entries, base)
	p.mu.Unlock()
	p.changed()
	return nil
}

func (p *powerFS) ReadFile(name string) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.fileLocked(name)
	if !ok {
		return nil, fs.ErrNotExist
	}
	return bytes.Clone(f.data), nil
}

func (p *powerFS) OpenRead(name string) (readerAtCloser, error) {
	data, err := p.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return nopCloser{bytes.NewReader(data)}, nil
}

// nopCloser is a ReaderAt with a Close that does nothing.
type nopCloser struct{ io.ReaderAt }

func (nopCloser) Close() error { return nil }

func (p *powerFS) Size(name string) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.fileLocked(name)
	if !ok {
		return 0, fs.ErrNotExist
	}
	return int64(len(f.data)), nil
}

func (p *powerFS) Exists(name string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if filepath.Clean(name) == "/" {
		return true, nil
	}
	e, _, _ := p.lookupLocked(name)
	return e != nil, nil
}

func (p *powerFS) Glob(pattern string) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dir := filepath.Dir(pattern)
	e, _, _ := p.lookupLocked(dir)
	d, ok := e.(*powerDir)
	if !ok {
		return nil, nil
	}
	var out []string
	for name := range d.entries {
		if ok, _ := filepath.Match(filepath.Base(pattern), name); ok {
			out = append(out, filepath.Join(dir, name))
		}
	}
	return out, nil
}

func (p *powerFS) Lock(string) (io.Closer, error) { return nopLock{}, nil }

type powerHandle struct {
	fs   *powerFS
	file *powerFile
	name string
}

func (h *powerHandle) WriteAt(b []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	if err := h.fs.stepLocked(); err != nil {
		h.fs.mu.Unlock()
		return 0, err
	}
	f := h.file
	if end := int(off) + len(b); end > len(f.data) {
		f.data = append(f.data, make([]byte, end-len(f.data))...)
	}
	copy(f.data[off:], b)
	h.fs.mu.Unlock()
	h.fs.changed()
	return len(b), nil
}

func (h *powerHandle) Sync() error {
	if h.fs.beforeSync != nil {
		h.fs.mu.Lock()
		first := !h.file.everSynced
		h.fs.mu.Unlock()
		h.fs.beforeSync(h.name, first)
	}
	h.fs.mu.Lock()
	if err := h.fs.stepLocked(); err != nil {
		h.fs.mu.Unlock()
		return err
	}
	h.file.synced, h.file.everSynced = bytes.Clone(h.file.data), true
	h.fs.mu.Unlock()
	h.fs.changed()
	return nil
}

func (h *powerHandle) Truncate(size int64) error {
	h.fs.mu.Lock()
	if err := h.fs.stepLocked(); err != nil {
		h.fs.mu.Unlock()
		return err
	}
	h.file.data = h.file.data[:size]
	h.fs.mu.Unlock()
	h.fs.changed()
	return nil
}

func (h *powerHandle) Close() error {
	if h.fs.onClose != nil {
		h.fs.onClose(h)
	}
	return nil
}
func (h *powerHandle) Name() string { return h.name }

// tearMode says what a power loss leaves of a file's bytes written since
// its last fsync: unsynced is that span, synced the bytes before it.
type tearMode struct {
	name string
	tear func(synced, data []byte) []byte
	// inPlaceKept says whether bytes overwritten within the synced length
	// since the last fsync (a durable-end slot) keep their new content or
	// their synced one; a sector's write is whole or not at all.
	inPlaceKept bool
}

// zerosFrom keeps data's length with zeros from byte n on.
func zerosFrom(data []byte, n int) []byte {
	out := bytes.Clone(data)
	clear(out[max(n, 0):])
	return out
}

var tearModes = []tearMode{
	{"dropped", func(synced, _ []byte) []byte { return synced }, false},
	{"all kept", func(_, data []byte) []byte { return data }, true},
	{"cut in half", func(synced, data []byte) []byte { return data[:len(synced)+(len(data)-len(synced))/2] }, false},
	{"zeros from the middle", func(synced, data []byte) []byte {
		return zerosFrom(data, len(synced)+(len(data)-len(synced))/2)
	}, true},
	{"last byte zero", func(synced, data []byte) []byte { return zerosFrom(data, max(len(synced), len(data)-1)) }, true},
	{"last 31 bytes zero", func(synced, data []byte) []byte { return zerosFrom(data, max(len(synced), len(data)-31)) }, false},
}

// image is the file system after a power loss now: each directory holds
// its entries as of its last fsync (or, with entriesKept, its current
// ones, as a file system that wrote them back early would), and each file
// its bytes as of its last fsync, plus what mode leaves of later ones.
func (p *powerFS) image(mode tearMode, entriesKept bool) *powerFS {
	p.mu.Lock()
	defer p.mu.Unlock()
	files := map[*powerFile]*powerFile{}
	var copyDir func(d *powerDir) *powerDir
	copyDir = func(d *powerDir) *powerDir {
		entries := d.synced
		if entriesKept {
			entries = d.entries
		}
		out := newPowerDir()
		for name, e := range entries {
			switch e := e.(type) {
			case *powerDir:
				out.entries[name] = copyDir(e)
			case *powerFile:
				nf, ok := files[e]
				if !ok {
					data := e.synced
					if len(e.data) >= len(e.synced) {
						// Bytes overwritten in place stay whole, new or old;
						// bytes past the synced length tear as mode says.
						current := bytes.Clone(e.data)
						if !mode.inPlaceKept {
							copy(current, e.synced)
						}
						data = mode.tear(current[:len(e.synced)], current)
					}
					nf = &powerFile{data: bytes.Clone(data), everSynced: true}
					nf.synced = nf.data
					files[e] = nf
				}
				out.entries[name] = nf
			}
		}
		out.synced = maps.Clone(out.entries)
		return out
	}
	return &powerFS{root: copyDir(p.root)}
}

// fingerprint is the whole content of p, to tell equal images apart.
func (p *powerFS) fingerprint() string {
	var b strings.Builder
	var walk func(prefix string, d *powerDir)
	walk = func(prefix string, d *powerDir) {
		for _, name := range slices.Sorted(maps.Keys(d.entries)) {
			switch e := d.entries[name].(type) {
			case *powerDir:
				fmt.Fprintf(&b, "%s/%s/\n", prefix, name)
				walk(prefix+"/"+name, e)
			case *powerFile:
				fmt.Fprintf(&b, "%s/%s %q\n", prefix, name, e.data)
			}
		}
	}
	walk("", p.root)
	return b.String()
}

// viewKey identifies a view by its generation and deployments.
func viewKey(capacity Capacity, pin *Pin) string {
	data, _, err := encodeSnapshot(capacity, pin, pin.generation)
	if err != nil {
		panic(err)
	}
	return string(data)
}
