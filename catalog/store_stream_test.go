package catalog

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"
)

// countingFS serves one store file from memory, or claims a size for it,
// and counts the bytes the store reads of it, whichever way it reads them.
// Every few MiB it reads, it measures the live heap.
type countingFS struct {
	bytesFS
	claimedSize int64 // when set, what Size reports
	read        int64
	// heapEvery, when set, is how often, in bytes read, the live heap is
	// measured into maxHeap.
	heapEvery int64
	nextHeap  int64
	maxHeap   uint64
}

func newCountingFS(data []byte) *countingFS {
	return &countingFS{bytesFS: bytesFS{data: &data}}
}

func (c *countingFS) ReadFile(name string) ([]byte, error) {
	data, err := c.bytesFS.ReadFile(name)
	c.read += int64(len(data))
	if c.heapEvery > 0 {
		c.maxHeap = max(c.maxHeap, liveHeap())
		runtime.KeepAlive(data)
	}
	return data, err
}

func (c *countingFS) OpenRead(string) (io.ReadCloser, error) {
	return io.NopCloser(&countingReader{fs: c, r: bytes.NewReader(*c.data)}), nil
}

func (c *countingFS) Size(name string) (int64, error) {
	if c.claimedSize != 0 {
		return c.claimedSize, nil
	}
	return c.bytesFS.Size(name)
}

type countingReader struct {
	fs *countingFS
	r  io.Reader
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	c := r.fs
	c.read += int64(n)
	if c.heapEvery > 0 && c.read >= c.nextHeap {
		c.nextHeap += c.heapEvery
		c.maxHeap = max(c.maxHeap, liveHeap())
	}
	return n, err
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func TestOpenStopsAtTheFirstBadRecord(t *testing.T) {
	// A good header, then 8 MiB of random bytes: refused at record 1,
	// having read no more than one buffer of them.
	w := &recordWriter{buf: []byte(storeMagic)}
	w.record(recordHeader, headerPayload(GenerousCapacity))
	data := w.buf
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 << 20 {
		data = append(data, byte(rng.Uint32()))
	}
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"random bytes after the header", data},
		{"random bytes from the start", data[len(storeMagic):]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := newCountingFS(bytes.Clone(tt.data))
			_, err := open(fsys, "in-memory")
			if err == nil {
				t.Fatal("random bytes opened")
			}
			if fsys.read > 1<<20 {
				t.Fatalf("read %d of %d bytes before refusing the store: %v", fsys.read, len(tt.data), err)
			}
		})
	}
}

func TestOpenRefusesAFileOverTheMaximumSizeUnread(t *testing.T) {
	fsys := newCountingFS(storeBytes(t))
	fsys.claimedSize = maxStoreBytes + 1
	_, err := open(fsys, "in-memory")
	var se *StoreError
	if !errors.As(err, &se) || !errors.Is(err, ErrMalformed) || se.Detail != "larger than the maximum store size" {
		t.Fatalf("Open of a store over the maximum size = %v", err)
	}
	if fsys.read != 0 {
		t.Fatalf("read %d bytes of a store over the maximum size", fsys.read)
	}
}

// longLog returns a store of one small deployment replaced in many
// committed transactions, about size bytes, and the view at its end.
func longLog(t *testing.T, size int) ([]byte, *Catalog) {
	t.Helper()
	model := New(GenerousCapacity)
	mustDeploy(t, model, weighted("acme", "thumbs", 1))
	data, chain, err := encodeSnapshot(GenerousCapacity, model.Pin(), model.Generation())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(data) < size; i++ {
		g := mustDeploy(t, model, weighted("acme", "thumbs", uint64(1+i%5), uint64(i%3)))
		dep := model.Pin().lookup("acme", "thumbs")
		var tx []byte
		tx, chain, err = encodeTransaction([]change{{key: DeploymentKey{"acme", "thumbs"}, dep: dep}}, g, g, chain)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, tx...)
	}
	return data, model
}

// TestOpenHoldsOneTransactionBeyondTheView opens an 8 MiB log whose live
// view is one deployment: the live heap never grows by more than a few
// MiB while it reads, where reading the file whole held all of it and
// more.
func TestOpenHoldsOneTransactionBeyondTheView(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and reads an 8 MiB store")
	}
	data, model := longLog(t, 8<<20)
	fsys := newCountingFS(data)
	data = nil
	fsys.heapEvery = 4 << 20
	fsys.nextHeap = fsys.heapEvery
	base := liveHeap()
	c, err := open(fsys, "in-memory")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if viewKey(GenerousCapacity, c.Pin()) != viewKey(GenerousCapacity, model.Pin()) {
		t.Fatalf("opened at generation %d, want %d", c.Generation(), model.Generation())
	}
	if fsys.maxHeap == 0 {
		t.Fatal("the heap was never measured")
	}
	if grew := int64(fsys.maxHeap) - int64(base); grew > 4<<20 {
		t.Fatalf("the live heap grew by %d bytes while Open read a %d-byte store", grew, len(*fsys.data))
	}
}

// TestATornTransactionOfValidRecordsIsDroppedWhole: a long uncommitted
// transaction of well-formed records, cut anywhere, is a torn tail.
func TestATornTransactionOfValidRecordsIsDroppedWhole(t *testing.T) {
	data, model := longLog(t, 64<<10)
	want := viewKey(GenerousCapacity, model.Pin())
	var changes []change
	for i := range 200 {
		dep, err := compileDeployment(&Deployment{Tenant: "acme", Service: fmt.Sprintf("svc-%d", i), Routes: weighted("acme", "x", 1).Routes}, model.Generation()+1)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, change{key: DeploymentKey{"acme", dep.service}, dep: dep})
	}
	var chain [sha256.Size]byte // the commit never checks: it is cut off
	tx, _, err := encodeTransaction(changes, model.Generation()+1, model.Generation()+1, chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{1, len(tx) / 3, len(tx) - 1} {
		c, err := openBytes(t, append(bytes.Clone(data), tx[:cut]...))
		if err != nil {
			t.Fatalf("cut after %d bytes: %v", cut, err)
		}
		if viewKey(GenerousCapacity, c.Pin()) != want {
			t.Fatalf("cut after %d bytes: opened at generation %d", cut, c.Generation())
		}
		_ = c.Close()
	}
}
