package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
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

func (c *countingFS) OpenRead(string) (readerAtCloser, error) {
	return nopCloser{&countingReader{fs: c, r: bytes.NewReader(*c.data)}}, nil
}

func (c *countingFS) Size(name string) (int64, error) {
	if c.claimedSize != 0 {
		return c.claimedSize, nil
	}
	return c.bytesFS.Size(name)
}

type countingReader struct {
	fs *countingFS
	r  io.ReaderAt
}

func (r *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.r.ReadAt(p, off)
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
	snapshot, _, err := encodeSnapshot(GenerousCapacity, New(GenerousCapacity).Pin(), 0)
	if err != nil {
		t.Fatal(err)
	}
	data := snapshot[:headerBytes(storeVersion, GenerousCapacity)]
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

// oneBigTransaction returns a store of one deployment followed by one
// transaction of about size bytes, committed or cut off just before its
// commit, and the length of the transaction and of its largest record.
// Its records are deletes of a pair that is not deployed (never applied,
// since such a transaction is never committed), or deployments of new
// pairs.
func oneBigTransaction(t *testing.T, size int, deletes, committed bool) (data []byte, txBytes, largest int) {
	t.Helper()
	model := New(GenerousCapacity)
	mustDeploy(t, model, weighted("acme", "thumbs", 1))
	data, chain, err := encodeSnapshot(GenerousCapacity, model.Pin(), model.Generation())
	if err != nil {
		t.Fatal(err)
	}
	g := model.Generation() + 1
	routes := weighted("acme", "x", 1).Routes
	var changes []change
	for i, n := 0, 0; n < size; i++ {
		// The deletes name one pair, in records of 45 bytes: the
		// transaction never commits, so they are never applied.
		key := DeploymentKey{Tenant: "a", Service: "b"}
		ch := change{key: key}
		if !deletes {
			key = DeploymentKey{Tenant: fmt.Sprintf("tenant-%07d", i), Service: "svc"}
			if ch.dep, err = compileDeployment(&Deployment{Tenant: key.Tenant, Service: key.Service, Routes: routes}, g); err != nil {
				t.Fatal(err)
			}
		}
		records, _, err := encodeChanges([]change{ch})
		if err != nil {
			t.Fatal(err)
		}
		n += len(records)
		changes = append(changes, ch)
	}
	records, _, err := encodeChanges(changes)
	if err != nil {
		t.Fatal(err)
	}
	for at := 0; at < len(records); {
		n := frameBytes + int(binary.BigEndian.Uint32(records[at+1:]))
		largest = max(largest, n)
		at += n
	}
	tx, _, err := encodeTransaction(changes, g, g, chain)
	if err != nil {
		t.Fatal(err)
	}
	if !committed {
		tx = tx[:len(records)]
	}
	return append(data, tx...), len(tx), largest
}

// TestOpenHoldsAtMostTwiceItsLargestTransaction opens stores whose largest
// transaction is 16 MiB, committed or not, and samples the live heap
// every MiB Open reads: beyond the view it returns, it never grows by more
// than twice that transaction, twice its largest record and 1 MiB (the
// bound docs/catalog-store.md states). Open held every record of the
// transaction it was reading, each in its own allocation with a 56-byte
// slice entry beside it, so an uncommitted transaction of small records
// took about three times its size; a 1 GiB one, 7.3 GB.
func TestOpenHoldsAtMostTwiceItsLargestTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and reads 16 MiB stores")
	}
	for _, tt := range []struct {
		name               string
		deletes, committed bool
	}{
		{"an uncommitted transaction of deletes", true, false},
		{"an uncommitted transaction of deployments", false, false},
		{"a committed transaction of deployments", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, txBytes, largest := oneBigTransaction(t, 16<<20, tt.deletes, tt.committed)
			fsys := newCountingFS(data)
			data = nil
			fsys.heapEvery = 1 << 20
			fsys.nextHeap = fsys.heapEvery
			base := liveHeap()
			c, err := open(fsys, "in-memory")
			if err != nil {
				t.Fatal(err)
			}
			view := int64(liveHeap()) - int64(base)
			defer c.Close()
			if tt.committed != (c.Pin().Len() > 1) {
				t.Fatalf("opened with %d deployments; the transaction committed: %v", c.Pin().Len(), tt.committed)
			}
			grew := int64(fsys.maxHeap) - int64(base)
			bound := max(view, 0) + 2*int64(txBytes) + 2*int64(largest) + 1<<20
			t.Logf("transaction %d bytes, largest record %d, view %d: the live heap grew by at most %d (%.2fx the transaction), bound %d",
				txBytes, largest, view, grew, float64(grew)/float64(txBytes), bound)
			if grew > bound {
				t.Fatalf("the live heap grew by %d bytes reading a %d-byte transaction (view %d bytes), over the bound %d", grew, txBytes, view, bound)
			}
		})
	}
}
