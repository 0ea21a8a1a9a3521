package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
// generation again for other content. When the dead process was still in
// Create and left no store, the new one creates it and deploys: before
// Create fsynced the directories above a store directory it found, a
// directory the dead Create made but had not yet fsynced lost that deploy.
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
			// The dead Create never wrote a store: the new process
			// creates one where it left its directories, as latentd does,
			// and deploys.
			if next, err = create(pfs, powerStoreDir, capacity); err != nil {
				t.Fatalf("killed at step %d: Create after it = %v", killAt, err)
			}
			mustDeploy(t, next, weighted("acme", "after-the-kill", 1))
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
	startCompaction(t, c, held, func() {})
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

// TestCloseWaitsForACompactionInFlight closes a catalog while a compaction
// is held at its snapshot's fsync: Close waits for it, the compaction
// sees the catalog closed and discards its temporary file, and the store
// reopens at the closed catalog's view.
func TestCloseWaitsForACompactionInFlight(t *testing.T) {
	capacity := GenerousCapacity
	pfs := newPowerFSWithSrv(t)
	c, err := create(pfs, powerStoreDir, capacity)
	if err != nil {
		t.Fatal(err)
	}
	c.store.rewriteFloor = 0
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pfs.beforeSync = func(_ string, first bool) {
		if first {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	startCompaction(t, c, held, func() { close(release) })
	want := viewKey(capacity, c.Pin())
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for {
		c.mu.Lock()
		done := c.closed
		c.mu.Unlock()
		if done {
			break
		}
		runtime.Gosched()
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if temps, _ := pfs.Glob(filepath.Join(powerStoreDir, tempPattern)); len(temps) != 0 {
		t.Fatalf("the discarded compaction left %v", temps)
	}
	reopened, err := open(pfs.image(tearModes[0], false), powerStoreDir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if viewKey(capacity, reopened.Pin()) != want {
		t.Fatalf("reopened at generation %d, want %d", reopened.Generation(), c.Generation())
	}
}

// startCompaction deploys until a change starts a compaction, then waits
// (on a loaded machine, for as long as a minute) until that compaction,
// running on its own goroutine, is held at its snapshot's first fsync
// (held closes). Whether the goroutine has run yet is the scheduler's
// business, so the wait is for the compaction that began, not a count of
// deploys. onFail runs before the test fails.
func startCompaction(t *testing.T, c *Catalog, held <-chan struct{}, onFail func()) {
	t.Helper()
	for i := 0; ; i++ {
		mustDeploy(t, c, weighted("acme", fmt.Sprintf("svc-%d", i%3), uint64(1+i), 1))
		c.mu.Lock()
		started := c.store.compaction != nil
		c.mu.Unlock()
		if started {
			break
		}
		if i > 100 {
			onFail()
			t.Fatal("no compaction started in 100 deploys")
		}
	}
	select {
	case <-held:
	case <-time.After(time.Minute):
		onFail()
		t.Fatal("the compaction never reached its snapshot's fsync")
	}
}

// TestAStoreInADirectoryNotYetDurableSurvivesAPowerLoss creates a store in
// a directory an installer made without an fsync (mkdir -p), and opens a
// store file copied into such a directory, then deploys: every image a
// power loss could leave holds the deploy. Before Create and Open fsynced
// the directories above the store's, the directory's entry was lost in the
// images that keep only fsynced entries, and the acknowledged deploy with
// it.
func TestAStoreInADirectoryNotYetDurableSurvivesAPowerLoss(t *testing.T) {
	capacity := GenerousCapacity
	for _, how := range []string{"create", "open"} {
		t.Run(how, func(t *testing.T) {
			pfs := newPowerFSWithSrv(t)
			if err := pfs.MkdirAll(powerStoreDir); err != nil {
				t.Fatal(err)
			}
			var c *Catalog
			var err error
			if how == "create" {
				c, err = create(pfs, powerStoreDir, capacity)
			} else {
				data, _, eerr := encodeSnapshot(capacity, New(capacity).Pin(), 0)
				if eerr != nil {
					t.Fatal(eerr)
				}
				f, cerr := pfs.CreateTemp(powerStoreDir, StoreFileName)
				if cerr != nil {
					t.Fatal(cerr)
				}
				if _, werr := f.WriteAt(data, 0); werr != nil {
					t.Fatal(werr)
				}
				c, err = open(pfs, powerStoreDir)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			pc := &powerLossCheck{capacity: capacity, dir: powerStoreDir, seen: map[string]bool{}}
			pc.set(powerExpectation{views: []string{viewKey(capacity, c.Pin())}, issued: c.Generation()})
			pc.take(pfs)
			pc.verify(t)
		})
	}
}

// TestCompactionFsyncsTheDirectoryAndReleasesTheOldFileOutsideTheLock
// runs a compaction to its end and looks at whether the catalog's mutex is
// held when it fsyncs the directory after its rename and when it closes
// the file it replaced: neither may be, since both cost what the file
// system makes them cost (a directory fsync, freeing the old file's
// blocks) and writers wait for whatever the mutex covers. Before, both ran
// under the mutex. The first change after it is acknowledged only once
// that fsync is done.
func TestCompactionFsyncsTheDirectoryAndReleasesTheOldFileOutsideTheLock(t *testing.T) {
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
	defer releaseIt()
	pfs.beforeSync = func(_ string, first bool) {
		if first {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	}
	startCompaction(t, c, held, releaseIt)
	c.mu.Lock()
	comp, old := c.store.compaction, c.store.file.(*powerHandle)
	c.mu.Unlock()
	// From here to comp.done only the compaction's goroutine uses the
	// mutex and the file system, so TryLock tells whether it holds it.
	lockedAt := map[string]bool{}
	var mu sync.Mutex
	observe := func(what string) {
		free := c.mu.TryLock()
		if free {
			c.mu.Unlock()
		}
		mu.Lock()
		lockedAt[what] = !free
		mu.Unlock()
	}
	pfs.onSyncDir = func(dir string) {
		if dir == powerStoreDir {
			observe("the directory fsync")
		}
	}
	pfs.onClose = func(h *powerHandle) {
		if h == old {
			observe("the old file's close")
		}
	}
	releaseIt()
	<-comp.done
	pfs.onSyncDir, pfs.onClose = nil, nil
	if !comp.swapped {
		t.Fatal("the compaction did not swap its file")
	}
	for _, what := range []string{"the directory fsync", "the old file's close"} {
		locked, seen := lockedAt[what]
		switch {
		case !seen:
			t.Errorf("the compaction did not run %s", what)
		case locked:
			t.Errorf("the compaction ran %s under the catalog's mutex", what)
		}
	}
	// The store appends to the compacted file, and a change reopens.
	mustDeploy(t, c, weighted("acme", "after", 1))
	want := viewKey(capacity, c.Pin())
	reopened, err := open(pfs.image(tearModes[0], false), powerStoreDir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if viewKey(capacity, reopened.Pin()) != want {
		t.Fatalf("reopened at generation %d, want %d", reopened.Generation(), c.Generation())
	}
}

// TestAChangeAfterACompactionWaitsForItsDirectoryFsync holds a
// compaction's directory fsync after its rename and deploys meanwhile: the
// deploy does not return before that fsync has, since until then a power
// loss could undo the rename and the change with it; and when the fsync
// fails the deploy fails (its outcome unknown) and the next one rewrites
// the store.
func TestAChangeAfterACompactionWaitsForItsDirectoryFsync(t *testing.T) {
	capacity := GenerousCapacity
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync fails %v", fail), func(t *testing.T) {
			pfs := newPowerFSWithSrv(t)
			c, err := create(pfs, powerStoreDir, capacity)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.store.rewriteFloor = 0
			// The compaction is held at its snapshot's fsync while the
			// test deploys to start it, then at its directory fsync.
			held, inSync := make(chan struct{}), make(chan struct{})
			holdSnapshot, holdSync := make(chan struct{}), make(chan struct{})
			var snapOnce, syncOnce, releasedSnap, releasedSync sync.Once
			releaseSnap := func() { releasedSnap.Do(func() { close(holdSnapshot) }) }
			releaseIt := func() { releasedSync.Do(func() { close(holdSync) }) }
			defer releaseIt()
			defer releaseSnap()
			pfs.beforeSync = func(_ string, first bool) {
				if first {
					snapOnce.Do(func() {
						close(held)
						<-holdSnapshot
					})
				}
			}
			syncFailure := errors.New("injected directory fsync failure")
			pfs.onSyncDir = func(string) {
				syncOnce.Do(func() {
					close(inSync)
					<-holdSync
				})
			}
			var failed atomic.Bool // only the compaction's fsync fails
			c.store.fs = &failingSyncDirFS{powerFS: pfs, fail: func() error {
				if fail && !failed.Swap(true) {
					return syncFailure
				}
				return nil
			}}
			startCompaction(t, c, held, releaseSnap)
			releaseSnap()
			select {
			case <-inSync:
			case <-time.After(time.Minute):
				t.Fatal("the compaction never reached its directory fsync")
			}
			deployed := make(chan error, 1)
			go func() {
				_, err := c.Deploy(weighted("acme", "meanwhile", 7))
				deployed <- err
			}()
			select {
			case err := <-deployed:
				t.Fatalf("a deploy returned (%v) while the compaction's directory fsync was held", err)
			case <-time.After(50 * time.Millisecond):
			}
			releaseIt()
			err = <-deployed
			if !fail {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var se *StoreError
			if !errors.As(err, &se) || se.Op != "fsync directory" || !errors.Is(err, syncFailure) {
				t.Fatalf("deploy after a failed directory fsync = %v", err)
			}
			mustDeploy(t, c, weighted("acme", "after", 1))
			want := viewKey(capacity, c.Pin())
			reopened, err := open(pfs.image(tearModes[0], false), powerStoreDir)
			if err != nil {
				t.Fatal(err)
			}
			defer reopened.Close()
			if viewKey(capacity, reopened.Pin()) != want {
				t.Fatalf("reopened at generation %d, want %d", reopened.Generation(), c.Generation())
			}
		})
	}
}

// failingSyncDirFS is a powerFS whose directory fsyncs fail when fail,
// or failDir for that directory, says.
type failingSyncDirFS struct {
	*powerFS
	fail    func() error
	failDir func(dir string) error
}

func (f *failingSyncDirFS) SyncDir(dir string) error {
	if f.failDir != nil {
		if err := f.failDir(dir); err != nil {
			return err
		}
	}
	if err := f.fail(); err != nil {
		if f.powerFS.onSyncDir != nil {
			f.powerFS.onSyncDir(dir)
		}
		return err
	}
	return f.powerFS.SyncDir(dir)
}

// TestCreateSkipsAnUnreadableDirectoryAboveTheParent: a directory above
// the store directory's parent that cannot be opened for an fsync (search
// permission only) does not fail Create; the parent itself must be
// fsynced, and any other failure fails it.
func TestCreateSkipsAnUnreadableDirectoryAboveTheParent(t *testing.T) {
	for _, tt := range []struct {
		unreadable string
		err        error
		fails      bool
	}{
		{"/srv", fs.ErrPermission, false},
		{"/srv/latent/new", fs.ErrPermission, true},
		{"/srv", errors.New("injected I/O error"), true},
	} {
		pfs := newPowerFSWithSrv(t)
		fsys := &failingSyncDirFS{powerFS: pfs}
		fsys.fail = func() error { return nil }
		fsys.failDir = func(d string) error {
			if d == tt.unreadable {
				return tt.err
			}
			return nil
		}
		c, err := create(fsys, powerStoreDir, GenerousCapacity)
		if tt.fails {
			var se *StoreError
			if !errors.As(err, &se) || se.File != tt.unreadable || !errors.Is(err, tt.err) {
				t.Fatalf("%s failing with %v: Create = %v, want a StoreError naming it", tt.unreadable, tt.err, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s failing with %v: Create = %v", tt.unreadable, tt.err, err)
		}
		_ = c.Close()
	}
}
