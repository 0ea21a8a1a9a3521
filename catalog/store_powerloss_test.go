package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
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

func (p *powerFS) OpenRead(name string) (io.ReadCloser, error) {
	data, err := p.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

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

func (h *powerHandle) Close() error { return nil }
func (h *powerHandle) Name() string { return h.name }

// tearMode says what a power loss leaves of a file's bytes written since
// its last fsync: unsynced is that span, synced the bytes before it.
type tearMode struct {
	name string
	tear func(synced, data []byte) []byte
}

// zerosFrom keeps data's length with zeros from byte n on.
func zerosFrom(data []byte, n int) []byte {
	out := bytes.Clone(data)
	clear(out[max(n, 0):])
	return out
}

var tearModes = []tearMode{
	{"dropped", func(synced, _ []byte) []byte { return synced }},
	{"all kept", func(_, data []byte) []byte { return data }},
	{"cut in half", func(synced, data []byte) []byte { return data[:len(synced)+(len(data)-len(synced))/2] }},
	{"zeros from the middle", func(synced, data []byte) []byte {
		return zerosFrom(data, len(synced)+(len(data)-len(synced))/2)
	}},
	{"last byte zero", func(synced, data []byte) []byte { return zerosFrom(data, max(len(synced), len(data)-1)) }},
	{"last 31 bytes zero", func(synced, data []byte) []byte { return zerosFrom(data, max(len(synced), len(data)-31)) }},
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
					if bytes.HasPrefix(e.data, e.synced) {
						data = mode.tear(e.synced, e.data)
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

// powerExpectation is what any image may open as at a moment: the
// acknowledged view, or the view of the change in flight; missing while
// Create has not returned. issued is the least high-water mark an image
// that opens may carry: no generation already served is handed out again.
type powerExpectation struct {
	views   []string
	missing bool
	issued  uint64
}

// powerLossCheck takes every image of a powerFS at every checkpoint and
// opens it later, on the test's goroutine, against what was expected when
// it was taken.
type powerLossCheck struct {
	capacity Capacity
	dir      string

	mu     sync.Mutex
	expect powerExpectation
	seen   map[string]bool
	queued []queuedImage
}

type queuedImage struct {
	image  *powerFS
	what   string
	expect powerExpectation
}

func (pc *powerLossCheck) set(e powerExpectation) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.expect = e
}

func (pc *powerLossCheck) take(p *powerFS) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p.mu.Lock()
	steps := p.steps
	p.mu.Unlock()
	for _, entriesKept := range []bool{false, true} {
		for _, mode := range tearModes {
			img := p.image(mode, entriesKept)
			fp := fmt.Sprintf("%s %v %d %q", img.fingerprint(), pc.expect.missing, pc.expect.issued, pc.expect.views)
			if pc.seen[fp] {
				continue
			}
			pc.seen[fp] = true
			pc.queued = append(pc.queued, queuedImage{image: img, expect: pc.expect,
				what: fmt.Sprintf("after step %d, unsynced bytes %s, unsynced directory entries kept %v", steps, mode.name, entriesKept)})
		}
	}
}

// verify opens every image taken so far.
func (pc *powerLossCheck) verify(t *testing.T) {
	t.Helper()
	pc.mu.Lock()
	queued := pc.queued
	pc.queued = nil
	pc.mu.Unlock()
	for _, q := range queued {
		c, err := open(q.image, pc.dir)
		if err != nil {
			if q.expect.missing && errors.Is(err, ErrStoreMissing) {
				continue
			}
			t.Errorf("%s: Open = %v", q.what, err)
			return
		}
		key := viewKey(pc.capacity, c.Pin())
		issued := c.issued
		_ = c.Close()
		if !slices.Contains(q.expect.views, key) {
			t.Errorf("%s: opened at generation %d, a view that was neither acknowledged nor in flight", q.what, c.Generation())
			return
		}
		if issued < q.expect.issued {
			t.Errorf("%s: opened with generation %d as the highest handed out, below %d, already served", q.what, issued, q.expect.issued)
			return
		}
	}
}

// powerSteps is a store's life after Create: deploys, an Apply, a
// delete, and enough replacements to compact the store several times.
// Each step is a change that can be made to any catalog, so an in-memory
// model makes it first and tells the view in flight.
func powerSteps() []func(c *Catalog) error {
	deploy := func(d Deployment) func(c *Catalog) error {
		return func(c *Catalog) error {
			_, err := c.Deploy(d)
			return err
		}
	}
	var steps []func(c *Catalog) error
	for i := range 4 {
		steps = append(steps, deploy(weighted("acme", fmt.Sprintf("svc-%d", i), 1, uint64(i))))
	}
	steps = append(steps, func(c *Catalog) error {
		_, err := c.Apply(Changes{
			Deploy: []Deployment{weighted("umbrella", "a", 1), weighted("umbrella", "b", 2, 1)},
			Delete: []DeploymentKey{{"acme", "svc-0"}},
		})
		return err
	})
	steps = append(steps, func(c *Catalog) error {
		_, err := c.Delete("acme", "svc-1")
		return err
	})
	for i := range 12 {
		steps = append(steps, deploy(weighted("acme", fmt.Sprintf("svc-%d", 2+i%2), uint64(2+i), 1)))
	}
	return steps
}

// storeDir is where the power-loss tests create their store: its two
// parents below /srv do not exist yet.
const powerStoreDir = "/srv/latent/new/store"

// newPowerFSWithSrv is a powerFS that holds a durable, empty /srv.
func newPowerFSWithSrv(t *testing.T) *powerFS {
	t.Helper()
	pfs := newPowerFS()
	if err := pfs.MkdirAll("/srv"); err != nil {
		t.Fatal(err)
	}
	pfs.root.synced = maps.Clone(pfs.root.entries)
	return pfs
}

// TestAPowerLossAtAnyStepOpensAtAnAcknowledgedView runs a store's life on
// a file system that can lose power, and opens every image a power loss
// could leave after every step of every append, compaction, Apply and
// Close: each opens, at the last acknowledged view or at the one in
// flight, and never below a generation already served. It catches a store
// directory whose entry in a parent that Create made was never fsynced
// (the store goes missing after an acknowledged deploy), and a zeroed tail
// of fewer than 32 bytes refused as damage.
func TestAPowerLossAtAnyStepOpensAtAnAcknowledgedView(t *testing.T) {
	capacity := GenerousCapacity
	pfs := newPowerFSWithSrv(t)
	pc := &powerLossCheck{capacity: capacity, dir: powerStoreDir, seen: map[string]bool{}}
	model := New(capacity)
	pc.set(powerExpectation{views: []string{viewKey(capacity, model.Pin())}, missing: true})
	pfs.checkpoint = pc.take
	c, err := create(pfs, powerStoreDir, capacity)
	if err != nil {
		t.Fatal(err)
	}
	c.store.rewriteFloor = 0
	ack := viewKey(capacity, c.Pin())
	pc.set(powerExpectation{views: []string{ack}})
	pc.verify(t)
	for i, step := range powerSteps() {
		served := c.Generation()
		if err := step(model); err != nil {
			t.Fatalf("step %d on the model: %v", i, err)
		}
		pc.set(powerExpectation{views: []string{ack, viewKey(capacity, model.Pin())}, issued: served})
		if err := step(c); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if g := c.Generation(); g != model.Generation() {
			t.Fatalf("step %d: generation %d, the model's %d", i, g, model.Generation())
		}
		ack = viewKey(capacity, c.Pin())
		pc.set(powerExpectation{views: []string{ack}, issued: c.Generation()})
		// A compaction in flight is checked against this step's view.
		waitForCompaction(c)
		pc.verify(t)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	pc.verify(t)
	if pfs.temps < 3 {
		t.Fatalf("the store was rewritten %d times, want a few compactions", pfs.temps)
	}
}

// TestAStoreOpenedAfterAKillSurvivesAPowerLoss kills the process at every
// step of a store's life, leaving what it wrote in the page cache, opens
// the store in a new process, and then loses power: every image opens at
// exactly the view the new process served, with its generations. Before
// Open fsynced what it read, a process killed between an append's write
// and its fsync left a change that the next process served and a power
// loss then took away, so the process after that handed out its
// generation again for other content.
func TestAStoreOpenedAfterAKillSurvivesAPowerLoss(t *testing.T) {
	capacity := GenerousCapacity
	for killAt := 1; ; killAt++ {
		pfs := newPowerFSWithSrv(t)
		pfs.killAt = killAt + pfs.steps
		c, err := create(pfs, powerStoreDir, capacity)
		killed := err != nil
		if !killed {
			c.store.rewriteFloor = 0
			for _, step := range powerSteps() {
				if err := step(c); err != nil {
					killed = true
					break
				}
				waitForCompaction(c)
				pfs.mu.Lock()
				killed = pfs.steps >= pfs.killAt
				pfs.mu.Unlock()
				if killed {
					break
				}
			}
			_ = c.Close()
		}
		if !killed {
			if killAt < 20 {
				t.Fatalf("the workload took only %d steps", killAt)
			}
			return
		}
		// A new process opens the store as the dead one left it.
		pfs.mu.Lock()
		pfs.killAt = 0
		pfs.mu.Unlock()
		next, err := open(pfs, powerStoreDir)
		if errors.Is(err, ErrStoreMissing) {
			continue // the dead Create never wrote a store
		}
		if err != nil {
			t.Fatalf("killed at step %d: Open = %v", killAt, err)
		}
		served := viewKey(capacity, next.Pin())
		issued := next.issued
		pc := &powerLossCheck{capacity: capacity, dir: powerStoreDir, seen: map[string]bool{}}
		pc.set(powerExpectation{views: []string{served}, issued: issued})
		pc.take(pfs)
		pc.verify(t)
		if err := next.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompactionDoesNotHoldWritersUp holds a compaction at the fsync of
// its snapshot and makes changes meanwhile: they complete without it, and
// once it goes on it appends them after its snapshot, so every image a
// power loss could leave at any step of it, and the store it leaves,
// holds every acknowledged change. A compaction under the catalog's mutex
// made every writer wait for it.
func TestCompactionDoesNotHoldWritersUp(t *testing.T) {
	capacity := GenerousCapacity
	pfs := newPowerFSWithSrv(t)
	c, err := create(pfs, powerStoreDir, capacity)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.store.rewriteFloor = 0
	held, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	releaseIt := func() { released.Do(func() { close(release) }) }
	defer releaseIt() // before Close, which waits for the compaction
	pfs.beforeSync = func(_ string, first bool) {
		// Only a compaction's snapshot is fsynced for the first time now.
		if first {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	for i := 0; ; i++ {
		mustDeploy(t, c, weighted("acme", fmt.Sprintf("svc-%d", i%3), uint64(1+i), 1))
		select {
		case <-held:
		default:
			if i > 100 {
				t.Fatal("no compaction started in 100 deploys")
			}
			continue
		}
		break
	}
	// The compaction is stuck at its snapshot's fsync; changes go on.
	pc := &powerLossCheck{capacity: capacity, dir: powerStoreDir, seen: map[string]bool{}}
	mustDeploy(t, c, weighted("acme", "meanwhile", 7))
	if _, err := c.Delete("acme", "svc-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(Changes{Deploy: []Deployment{weighted("umbrella", "a", 1), weighted("umbrella", "b", 2, 1)}}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	pending := len(c.store.compaction.pending)
	c.mu.Unlock()
	if pending < 3 {
		t.Fatalf("%d changes wait for the compaction, want at least the 3 made while it was held", pending)
	}
	want := viewKey(capacity, c.Pin())
	pc.set(powerExpectation{views: []string{want}, issued: c.Generation()})
	pfs.checkpoint = pc.take
	before := pfs.temps
	releaseIt()
	waitForCompaction(c)
	pfs.checkpoint = nil
	pc.verify(t)
	if pfs.temps != before {
		t.Fatalf("%d more rewrites", pfs.temps-before)
	}
	c.mu.Lock()
	file := c.store.file.(*powerHandle)
	c.mu.Unlock()
	if !strings.Contains(file.name, ".tmp-") {
		t.Fatalf("the store still appends to %s, not to the compacted file", file.name)
	}
	// It appends to the compacted file from where the changes end.
	mustDeploy(t, c, weighted("acme", "after", 1))
	want = viewKey(capacity, c.Pin())
	reopened, err := open(pfs.image(tearModes[0], false), powerStoreDir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if viewKey(capacity, reopened.Pin()) != want {
		t.Fatalf("reopened at generation %d, want %d", reopened.Generation(), c.Generation())
	}
}
