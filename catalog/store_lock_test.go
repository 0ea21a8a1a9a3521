package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAnOpenStoreRefusesEveryOtherOpenerInTheSameProcess(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustDeploy(t, c, weighted("acme", "thumbs", 1))

	_, err = Open(dir)
	if !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("Open of a held store = %v, want ErrStoreInUse", err)
	}
	var se *StoreError
	if !errors.As(err, &se) || se.File != dir || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("the in-use error %q does not name the directory", err)
	}
	if _, err := Create(dir, GenerousCapacity); !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("Create over a held store = %v, want ErrStoreInUse", err)
	}
	other := New(GenerousCapacity)
	if err := other.WriteStore(dir); !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("another catalog's WriteStore over a held store = %v, want ErrStoreInUse", err)
	}
	// A directory reached by another name is the same directory.
	link := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link); !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("Open through a symbolic link = %v, want ErrStoreInUse", err)
	}
	// The catalog writes its own directory under the lock it holds.
	if err := c.WriteStore(link); err != nil {
		t.Fatalf("WriteStore to the catalog's own directory: %v", err)
	}
	if g := mustDeploy(t, c, weighted("globex", "render", 1)); g != 2 {
		t.Fatalf("generation %d after the refused openers, want 2", g)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close = %v", err)
	}
	defer reopened.Close()
	if reopened.Generation() != 2 || reopened.Pin().Len() != 2 {
		t.Fatalf("reopened at generation %d with %d deployments", reopened.Generation(), reopened.Pin().Len())
	}
}

func TestAClosedCatalogRefusesChangesAndKeepsServing(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T) *Catalog
	}{
		{"store-backed", func(t *testing.T) *Catalog {
			c, err := Create(t.TempDir(), GenerousCapacity)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}},
		{"in memory", func(*testing.T) *Catalog { return New(GenerousCapacity) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.make(t)
			mustDeploy(t, c, weighted("acme", "thumbs", 1))
			pin := c.Pin()
			for i := range 2 {
				if err := c.Close(); err != nil {
					t.Fatalf("Close #%d = %v", i+1, err)
				}
			}
			if _, err := c.Deploy(weighted("globex", "render", 1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Deploy after Close = %v, want ErrClosed", err)
			}
			if _, err := c.Delete("acme", "thumbs"); !errors.Is(err, ErrClosed) {
				t.Fatalf("Delete after Close = %v, want ErrClosed", err)
			}
			if c.Pin() != pin || c.Generation() != 1 {
				t.Fatal("a closed catalog changed its view")
			}
			mustResolve(t, c.Pin(), Target{"acme", "thumbs", "resize"}, "k")
			// A snapshot of a closed catalog can still be written, under
			// the directory's lock like any other writer.
			dir := t.TempDir()
			if err := c.WriteStore(dir); err != nil {
				t.Fatal(err)
			}
			reopened, err := Open(dir)
			if err != nil || reopened.Generation() != 1 {
				t.Fatalf("reopened snapshot: %v", err)
			}
			_ = reopened.Close()
		})
	}
}

func TestConcurrentCreatorsExactlyOneWins(t *testing.T) {
	const rounds, creators = 20, 8
	for range rounds {
		dir := filepath.Join(t.TempDir(), "store")
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			winners []*Catalog
			losers  []error
		)
		for i := range creators {
			wg.Go(func() {
				<-start
				c, err := Create(dir, Capacity{MaxRevisions: uint64(100 + i), MaxPolicyBytes: 1 << 20})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					winners = append(winners, c)
				} else {
					losers = append(losers, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d of %d concurrent creators succeeded", len(winners), creators)
		}
		for _, err := range losers {
			if !errors.Is(err, ErrStoreInUse) && !errors.Is(err, ErrStoreExists) {
				t.Fatalf("a losing creator got %v, want ErrStoreInUse or ErrStoreExists", err)
			}
		}
		want := winners[0].Capacity()
		if err := winners[0].Close(); err != nil {
			t.Fatal(err)
		}
		c, err := Open(dir)
		if err != nil || c.Capacity() != want {
			t.Fatalf("the store holds another creator's capacity: %v, %v", c, err)
		}
		_ = c.Close()
	}
}

// TestConcurrentOpenersLoseNoDeploy is the accident the lock prevents: while
// one open catalog deploys, other goroutines keep trying to open, create
// and overwrite the same directory. Every one of them is refused without
// touching the directory, so no deploy loses its temporary file, every
// acknowledged deploy survives a reopen, and generations never repeat.
func TestConcurrentOpenersLoseNoDeploy(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	deploys := 200
	if testing.Short() {
		deploys = 50
	}
	var (
		done    = make(chan struct{})
		wg      sync.WaitGroup
		refused atomic.Int64
		wrong   = make(chan error, 16)
	)
	for i := range 6 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				var err error
				switch i % 3 {
				case 0:
					var other *Catalog
					if other, err = Open(dir); err == nil {
						_ = other.Close()
					}
				case 1:
					var other *Catalog
					if other, err = Create(dir, GenerousCapacity); err == nil {
						_ = other.Close()
					}
				case 2:
					err = New(GenerousCapacity).WriteStore(dir)
				}
				if !errors.Is(err, ErrStoreInUse) {
					select {
					case wrong <- fmt.Errorf("goroutine %d: %v, want ErrStoreInUse", i, err):
					default:
					}
					return
				}
				refused.Add(1)
			}
		})
	}
	acknowledged := map[DeploymentKey]uint64{}
	var last uint64
	for n := range deploys {
		d := weighted("acme", fmt.Sprintf("svc-%d", n%17), 1, uint64(n%5))
		g, err := c.Deploy(d)
		if err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("deploy %d failed under concurrent openers: %v", n, err)
		}
		if g <= last {
			close(done)
			wg.Wait()
			t.Fatalf("deploy %d got generation %d after %d", n, g, last)
		}
		last = g
		acknowledged[DeploymentKey{d.Tenant, d.Service}] = g
	}
	close(done)
	wg.Wait()
	close(wrong)
	for err := range wrong {
		t.Error(err)
	}
	if refused.Load() == 0 {
		t.Fatal("no opener ran while the deploys did")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if reopened.Generation() != last {
		t.Fatalf("reopened at generation %d, the last acknowledged deploy was %d", reopened.Generation(), last)
	}
	for key, g := range acknowledged {
		if _, got, ok := reopened.Pin().Deployment(key.Tenant, key.Service); !ok || got != g {
			t.Fatalf("acknowledged deploy of %v at %d reopened as %d (present %v)", key, g, got, ok)
		}
	}
	if stale, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(stale) != 0 {
		t.Fatalf("temporary files left behind: %v", stale)
	}
}

// TestTakingTurnsHandsOutEveryGenerationOnce has goroutines race to open
// one directory; whoever wins deploys a few times and closes. Across all of
// them no generation is acknowledged twice and none is lost.
func TestTakingTurnsHandsOutEveryGenerationOnce(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	const workers, turns, perTurn = 4, 5, 3
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		seen  = map[uint64]DeploymentKey{}
		final = map[DeploymentKey]uint64{}
		fails []error
	)
	for w := range workers {
		wg.Go(func() {
			for turn := 0; turn < turns; {
				c, err := Open(dir)
				if errors.Is(err, ErrStoreInUse) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					mu.Lock()
					fails = append(fails, err)
					mu.Unlock()
					return
				}
				for k := range perTurn {
					d := weighted(fmt.Sprintf("t%d", w), fmt.Sprintf("s%d", k), 1)
					g, err := c.Deploy(d)
					mu.Lock()
					if err != nil {
						fails = append(fails, err)
					} else if prev, dup := seen[g]; dup {
						fails = append(fails, fmt.Errorf("generation %d acknowledged to %v and %s/%s", g, prev, d.Tenant, d.Service))
					} else {
						seen[g] = DeploymentKey{d.Tenant, d.Service}
						final[DeploymentKey{d.Tenant, d.Service}] = max(final[DeploymentKey{d.Tenant, d.Service}], g)
					}
					mu.Unlock()
				}
				if err := c.Close(); err != nil {
					mu.Lock()
					fails = append(fails, err)
					mu.Unlock()
				}
				turn++
			}
		})
	}
	wg.Wait()
	for _, err := range fails {
		t.Error(err)
	}
	if len(seen) != workers*turns*perTurn {
		t.Fatalf("%d generations acknowledged, want %d", len(seen), workers*turns*perTurn)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	if reopened.Generation() != uint64(len(seen)) {
		t.Fatalf("reopened at generation %d after %d acknowledged deploys", reopened.Generation(), len(seen))
	}
	for key, g := range final {
		if _, got, ok := reopened.Pin().Deployment(key.Tenant, key.Service); !ok || got != g {
			t.Fatalf("the last deploy of %v was acknowledged at %d, reopened at %d", key, g, got)
		}
	}
}

func TestGenerationsAreNeverReusedAcrossRestarts(t *testing.T) {
	t.Run("after deletes", func(t *testing.T) {
		dir := t.TempDir()
		c, err := Create(dir, GenerousCapacity)
		if err != nil {
			t.Fatal(err)
		}
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		mustDeploy(t, c, weighted("globex", "render", 1))
		for _, key := range []DeploymentKey{{"acme", "thumbs"}, {"globex", "render"}} {
			if _, err := c.Delete(key.Tenant, key.Service); err != nil {
				t.Fatal(err)
			}
		}
		highest := c.Generation()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		reopened, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if reopened.Pin().Len() != 0 {
			t.Fatal("deleted deployments came back")
		}
		if g := mustDeploy(t, reopened, weighted("acme", "thumbs", 1)); g <= highest {
			t.Fatalf("first generation after the restart %d, an earlier change had %d", g, highest)
		}
	})
	t.Run("after a failed write", func(t *testing.T) {
		dir := t.TempDir()
		c, err := Create(dir, GenerousCapacity)
		if err != nil {
			t.Fatal(err)
		}
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		useFS(c, &faultFS{fail: map[string]error{"write": os.ErrPermission}})
		spent, err := c.Deploy(weighted("globex", "render", 1))
		if err == nil {
			t.Fatal("the injected failure did not fail the deploy")
		}
		// Close records the spent generation, though no view holds it.
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		reopened, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if reopened.Generation() != 1 || reopened.Pin().Len() != 1 {
			t.Fatalf("reopened at generation %d with %d deployments, want the view before the failure", reopened.Generation(), reopened.Pin().Len())
		}
		if g := mustDeploy(t, reopened, weighted("globex", "render", 1)); g <= spent {
			t.Fatalf("generation %d after the restart; %d was spent before it", g, spent)
		}
	})
	t.Run("through a snapshot", func(t *testing.T) {
		c := New(GenerousCapacity)
		mustDeploy(t, c, weighted("acme", "thumbs", 1))
		if _, err := c.Delete("acme", "thumbs"); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := c.WriteStore(dir); err != nil {
			t.Fatal(err)
		}
		reopened, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if g := mustDeploy(t, reopened, weighted("acme", "thumbs", 1)); g != 3 {
			t.Fatalf("generation %d after a snapshot at 2, want 3", g)
		}
	})
}

// rewriteRecord returns the format 3 store data with the payload of its
// record number index replaced, resealed.
func rewriteRecord(t *testing.T, data []byte, index int, payload []byte) []byte {
	t.Helper()
	w := &recordWriter{buf: bytes.Clone(data[:preambleBytes])}
	lr := newLogReader(bytes.NewReader(data), int64(len(data)))
	lr.seek(preambleBytes)
	for i := 0; lr.at < lr.size; i++ {
		f, torn, ferr, err := lr.readFrame(i)
		if err != nil || ferr != nil || torn {
			t.Fatalf("record %d: %+v %v", i, ferr, err)
		}
		if i == index {
			f.payload = payload
		}
		w.record(f.kind, f.payload)
	}
	return reseal(w.buf)
}

func TestStoreHighWaterMark(t *testing.T) {
	c := New(GenerousCapacity)
	mustDeploy(t, c, weighted("acme", "thumbs", 1))
	mustDeploy(t, c, weighted("acme", "thumbs", 2))
	data, chain, err := encodeSnapshot(GenerousCapacity, c.Pin(), 9)
	if err != nil {
		t.Fatal(err)
	}
	// Records: 0 header, 1-3 the deployment, 4 the commit.
	const commit = 4
	t.Run("the mark survives a reopen", func(t *testing.T) {
		dec, ferr := decodeStore(data)
		if ferr != nil || dec.pin.Generation() != 2 || dec.issued != 9 {
			t.Fatalf("decoded %+v: %+v", dec, ferr)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StoreFileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		reopened, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer reopened.Close()
		if g := mustDeploy(t, reopened, weighted("globex", "render", 1)); g != 10 {
			t.Fatalf("first generation after a mark of 9: %d", g)
		}
	})
	t.Run("a mark below the generation is refused", func(t *testing.T) {
		_, err := openBytes(t, rewriteRecord(t, data, commit, commitPayload(2, 1, 3, chain)))
		assertStoreError(t, err, ErrMalformed, "issued generation below")
	})
	t.Run("an appended change at or below the mark is refused", func(t *testing.T) {
		dep, err := compileDeployment(&Deployment{Tenant: "globex", Service: "render", Routes: weighted("x", "y", 1).Routes}, 9)
		if err != nil {
			t.Fatal(err)
		}
		tx, _, err := encodeTransaction([]change{{key: DeploymentKey{"globex", "render"}, dep: dep}}, 9, 9, chain)
		if err != nil {
			t.Fatal(err)
		}
		_, err = openBytes(t, append(bytes.Clone(data), tx...))
		assertStoreError(t, err, ErrMalformed, "generation not above every earlier one")
	})
	t.Run("an unknown version is refused", func(t *testing.T) {
		header := binary.AppendUvarint(nil, storeVersion+1)
		header = binary.AppendUvarint(header, GenerousCapacity.MaxRevisions)
		header = binary.AppendUvarint(header, GenerousCapacity.MaxPolicyBytes)
		_, err := openBytes(t, rewriteRecord(t, data, 0, header))
		assertStoreError(t, err, ErrMalformed, "unsupported format version")
	})
}
