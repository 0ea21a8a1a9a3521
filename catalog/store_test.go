package catalog

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// storeWithHistory makes a store-backed catalog holding good.json, one
// replacement and one deletion, so generations are not just 1..n. The
// catalog is open, holding dir, until the test closes it or ends.
func storeWithHistory(t *testing.T, dir string) *Catalog {
	t.Helper()
	f := goodFile(t)
	c, err := Create(dir, f.Capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	for _, d := range f.Deployments {
		mustDeploy(t, c, d)
	}
	replacement := f.Deployments[0]
	replacement.Routes = replacement.Routes[:2]
	mustDeploy(t, c, replacement)
	if _, err := c.Delete("initech", "jobs"); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRestartRebuildsIdenticalCatalog(t *testing.T) {
	dir := t.TempDir()
	c := storeWithHistory(t, dir)
	before := snapshotView(t, c.Pin())
	rev := mustResolve(t, c.Pin(), Target{"globex", "render", "frame"}, "k")
	policyBefore, _ := c.Pin().RevisionPolicy(rev)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	after := snapshotView(t, reopened.Pin())
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("reopened catalog differs:\nbefore %+v\nafter  %+v", before, after)
	}
	if reopened.Capacity() != c.Capacity() || reopened.Generation() != 6 {
		t.Fatalf("capacity %+v generation %d", reopened.Capacity(), reopened.Generation())
	}
	policyAfter, ok := reopened.Pin().RevisionPolicy(rev)
	if !ok || !reflect.DeepEqual(policyBefore, policyAfter) {
		t.Fatalf("a resolution from before the restart: %v %v", policyAfter, ok)
	}
	// The counter continues where it stopped: no generation is reused.
	if g := mustDeploy(t, reopened, weighted("initech", "jobs", 1)); g != 7 {
		t.Fatalf("first generation after restart %d, want 7", g)
	}
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir)
	if err != nil || again.Generation() != 7 {
		t.Fatalf("a reopened catalog does not persist its changes: %v %v", again, err)
	}
	_ = again.Close()
}

func TestWriteStoreOfInMemoryCatalog(t *testing.T) {
	c, err := FromFile(goodFile(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "nested", "store")
	if err := c.WriteStore(dir); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snapshotView(t, c.Pin()), snapshotView(t, reopened.Pin())) {
		t.Fatal("WriteStore then Open changed the catalog")
	}
	// An open store belongs to its catalog: nobody else writes it.
	mustDeploy(t, c, weighted("acme", "extra", 1))
	if err := c.WriteStore(dir); !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("WriteStore over an open store = %v, want ErrStoreInUse", err)
	}
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the store.
	if err := c.WriteStore(dir); err != nil {
		t.Fatal(err)
	}
	if reopened, err = Open(dir); err != nil || reopened.Generation() != c.Generation() {
		t.Fatalf("rewritten store: %v", err)
	}
	defer reopened.Close()
	if stale, _ := filepath.Glob(filepath.Join(dir, tempPattern)); len(stale) != 0 {
		t.Fatalf("temporary files left behind: %v", stale)
	}
}

func TestCreateRefusesAnExistingStore(t *testing.T) {
	dir := t.TempDir()
	first, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, GenerousCapacity); !errors.Is(err, ErrStoreInUse) {
		t.Fatalf("Create while the first is open = %v, want ErrStoreInUse", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir, GenerousCapacity); !errors.Is(err, ErrStoreExists) {
		t.Fatalf("second Create = %v", err)
	}
	c, err := Open(dir)
	if err != nil || c.Generation() != 0 || c.Pin().Len() != 0 {
		t.Fatalf("empty store reopens as %v, %v", c, err)
	}
	_ = c.Close()
}

func storeBytes(t *testing.T) []byte {
	t.Helper()
	dir := t.TempDir()
	_ = storeWithHistory(t, dir).Close()
	data, err := os.ReadFile(filepath.Join(dir, StoreFileName))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// bytesFS serves a store file from memory, so a test can open thousands
// of damaged variants without writing them. Cutting off a torn tail cuts
// the bytes it holds.
type bytesFS struct {
	osFS
	data *[]byte
}

func (b bytesFS) ReadFile(string) ([]byte, error) { return bytes.Clone(*b.data), nil }
func (b bytesFS) OpenRead(string) (readerAtCloser, error) {
	return nopCloser{bytes.NewReader(bytes.Clone(*b.data))}, nil
}
func (b bytesFS) Size(string) (int64, error)     { return int64(len(*b.data)), nil }
func (b bytesFS) SyncDir(string) error           { return nil }
func (b bytesFS) Exists(string) (bool, error)    { return true, nil }
func (b bytesFS) Glob(string) ([]string, error)  { return nil, nil }
func (b bytesFS) Remove(string) error            { return nil }
func (b bytesFS) Lock(string) (io.Closer, error) { return nopLock{}, nil }
func (b bytesFS) OpenFile(name string) (storeFile, error) {
	return memFile{name: name, data: b.data}, nil
}

type memFile struct {
	name string
	data *[]byte
}

func (m memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(*m.data) {
		*m.data = append(*m.data, make([]byte, end-len(*m.data))...)
	}
	return copy((*m.data)[off:], p), nil
}
func (m memFile) Truncate(size int64) error { *m.data = (*m.data)[:size]; return nil }
func (m memFile) Sync() error               { return nil }
func (m memFile) Close() error              { return nil }
func (m memFile) Name() string              { return m.name }

type nopLock struct{}

func (nopLock) Close() error { return nil }

// openBytes opens data as the content of a store file.
func openBytes(t *testing.T, data []byte) (*Catalog, error) {
	t.Helper()
	data = bytes.Clone(data)
	return open(bytesFS{data: &data}, filepath.Join("testdata-in-memory", "store"))
}

func TestOpenRefusesADamagedFileOnDisk(t *testing.T) {
	dir := t.TempDir()
	_ = storeWithHistory(t, dir).Close()
	path := filepath.Join(dir, StoreFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	assertStoreError(t, err, ErrChecksumMismatch, path+": record ")
	// A store cut inside its first transaction never committed anything.
	if err := os.WriteFile(path, data[:len(storeMagic)+frameBytes+10], 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	assertStoreError(t, err, ErrTruncated, "truncated")
}

func assertStoreError(t *testing.T, err error, reason error, text string) {
	t.Helper()
	var se *StoreError
	if !errors.As(err, &se) || !errors.Is(err, reason) {
		t.Fatalf("error %v, want a StoreError for %v", err, reason)
	}
	if !strings.Contains(err.Error(), StoreFileName) || !strings.Contains(err.Error(), text) {
		t.Fatalf("error %q does not name the file and %q", err, text)
	}
}

func TestOpenRefusesAMissingStore(t *testing.T) {
	_, err := Open(t.TempDir())
	assertStoreError(t, err, ErrStoreMissing, "missing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v is not fs.ErrNotExist", err)
	}
}

// TestEveryTruncationOpensAtTheLastCommitBeforeIt cuts a store that holds
// a history of appended changes at every byte. Before the end of the first
// commit the store refuses to open; after it, it opens at exactly the
// last commit before the cut (a crash can only cut the change in flight:
// every earlier one was fsynced), and cuts the torn tail off.
func TestEveryTruncationOpensAtTheLastCommitBeforeIt(t *testing.T) {
	log := logWithHistory(t)
	for n := range len(log.data) + 1 {
		at := log.lastCommitAt(n)
		// As the file was while the transaction cut was the last append.
		data := log.data[:n]
		if at >= 0 {
			data = durableTo(data, log.commits[at].end)
		}
		c, err := openBytes(t, data)
		if at < 0 {
			if c != nil {
				t.Fatalf("a store cut to %d of %d bytes, before its first commit, opened", n, len(log.data))
			}
			assertStoreError(t, err, ErrTruncated, "truncated")
			continue
		}
		if err != nil {
			t.Fatalf("a store cut to %d bytes (commit %d ends at %d): %v", n, at, log.commits[at].end, err)
		}
		if got := snapshotView(t, c.Pin()); !equalViews(got, log.commits[at].view) {
			t.Fatalf("a store cut to %d bytes opened at generation %d, want %d", n, got.Generation, log.commits[at].view.Generation)
		}
		if c.store.end != int64(log.commits[at].end) {
			t.Fatalf("a store cut to %d bytes appends at %d, want %d", n, c.store.end, log.commits[at].end)
		}
	}
}

func TestOpenRefusesEveryFlippedByte(t *testing.T) {
	data := logWithHistory(t).data
	for i := range data {
		damaged := bytes.Clone(data)
		damaged[i] ^= 0x20
		c, err := openBytes(t, damaged)
		if c != nil && (i < len(storeMagic) || i >= preambleBytes) {
			t.Fatalf("a store with byte %d flipped opened", i)
		}
		if i < len(storeMagic) {
			assertStoreError(t, err, ErrMalformed, "not a catalog store")
			continue
		}
		if i < preambleBytes {
			// One durable-end slot reads as one whose write was torn;
			// the other still says how far the file was durable.
			if err != nil {
				t.Fatalf("a store with byte %d, in a durable-end slot, flipped: %v", i, err)
			}
			_ = c.Close()
			continue
		}
		// A flip in a length or a kind fails the record header's CRC; a
		// flip anywhere else fails the record's SHA-256.
		assertStoreError(t, err, ErrChecksumMismatch, "checksum mismatch")
	}
}

func TestOpenRefusesContentItsChecksumsDoNotExplain(t *testing.T) {
	data := storeBytes(t)
	garbage := bytes.Repeat([]byte{0xa5}, 64)
	tests := []struct {
		name   string
		data   []byte
		detail string
	}{
		{"bytes after the last commit that no writer wrote", append(bytes.Clone(data), garbage...), "record header"},
		{"a foreign file", []byte("{\"deployments\": []}"), "not a catalog store"},
		{"an empty file", nil, "truncated"},
		{"a header alone", data[:len(storeMagic)+frameBytes+len(headerPayload(goodFile(t).Capacity))], "ends before the first commit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openBytes(t, tt.data)
			var se *StoreError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("Open = %v, want %q", err, tt.detail)
			}
		})
	}
}

func TestOpenRefusesWellFramedInvalidContent(t *testing.T) {
	valid := func() (*Pin, *deployment) {
		dep, err := compileDeployment(&Deployment{Tenant: "acme", Service: "thumbs", Routes: weighted("acme", "thumbs", 1).Routes}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return emptyPin(0).apply([]change{{key: DeploymentKey{"acme", "thumbs"}, dep: dep}}, 1), dep
	}
	tests := []struct {
		name     string
		capacity Capacity
		mutate   func(p *Pin, d *deployment)
		detail   string
	}{
		{"a deployment that breaks a rule", GenerousCapacity, func(p *Pin, d *deployment) {
			d.routes[0].revisions[0].spec.Policy.Threading = 7
		}, "invalid deployment"},
		{"a deployment newer than the catalog", GenerousCapacity, func(p *Pin, d *deployment) { d.generation = 2 }, "outside"},
		{"a deployment at generation 0", GenerousCapacity, func(p *Pin, d *deployment) { d.generation = 0 }, "outside"},
		{"more than the capacity", Capacity{MaxRevisions: 0, MaxPolicyBytes: 1 << 20}, func(*Pin, *deployment) {}, "exceed the capacity"},
		{"a non-canonical record", GenerousCapacity, func(p *Pin, d *deployment) {
			d.routes[0].revisions[0].spec.Policy.Features = []string{"threads", "simd"}
		}, "non-canonical"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pin, dep := valid()
			tt.mutate(pin, dep)
			data, _, err := encodeSnapshot(tt.capacity, pin, pin.generation)
			if err != nil {
				t.Fatal(err)
			}
			_, err = openBytes(t, data)
			assertStoreError(t, err, ErrMalformed, tt.detail)
		})
	}
}

func TestAdmissionLookupsTouchNoFileAndAllocateNothing(t *testing.T) {
	dir := t.TempDir()
	_ = storeWithHistory(t, dir).Close()
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	pin := c.Pin()
	rev := mustResolve(t, pin, Target{"acme", "thumbs", "resize"}, "k")
	if _, ok := pin.RevisionPolicy(rev); !ok {
		t.Fatal("lookup failed once the store was gone")
	}
	forged := *rev
	forged.Generation++
	if n := testing.AllocsPerRun(1000, func() { _, _ = pin.RevisionPolicy(rev) }); n != 0 {
		t.Fatalf("an accepted lookup allocates %v times", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = pin.RevisionPolicy(&forged) }); n != 0 {
		t.Fatalf("a rejected lookup allocates %v times", n)
	}
}
