package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// commitPoint is the store file length right after one commit and the
// view it committed.
type commitPoint struct {
	end  int
	view view
	pin  *Pin
}

type logHistory struct {
	data    []byte
	commits []commitPoint // in file order
}

// lastCommitAt returns the index of the last commit that ends at or before
// n bytes, or -1.
func (h *logHistory) lastCommitAt(n int) int {
	at := -1
	for i, c := range h.commits {
		if c.end <= n {
			at = i
		}
	}
	return at
}

// logWithHistory builds a store through appends only: good.json deployed
// one by one, a replacement, a delete and an Apply, recording the file
// length and the view after each commit.
func logWithHistory(t testing.TB) *logHistory {
	t.Helper()
	dir := t.TempDir()
	f := goodFile(t)
	c, err := Create(dir, f.Capacity)
	if err != nil {
		t.Fatal(err)
	}
	h := &logHistory{}
	record := func() {
		t.Helper()
		info, err := os.Stat(filepath.Join(dir, StoreFileName))
		if err != nil {
			t.Fatal(err)
		}
		h.commits = append(h.commits, commitPoint{end: int(info.Size()), view: snapshotView(t, c.Pin()), pin: c.Pin()})
	}
	record()
	for _, d := range f.Deployments {
		mustDeploy(t, c, d)
		record()
	}
	replacement := f.Deployments[0]
	replacement.Routes = replacement.Routes[:2]
	mustDeploy(t, c, replacement)
	record()
	if _, err := c.Delete("initech", "jobs"); err != nil {
		t.Fatal(err)
	}
	record()
	if _, err := c.Apply(Changes{
		Deploy: []Deployment{weighted("umbrella", "a", 1), weighted("umbrella", "b", 2, 1)},
		Delete: []DeploymentKey{{"globex", "render"}},
	}); err != nil {
		t.Fatal(err)
	}
	record()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if h.data, err = os.ReadFile(filepath.Join(dir, StoreFileName)); err != nil {
		t.Fatal(err)
	}
	if len(h.data) != h.commits[len(h.commits)-1].end {
		t.Fatalf("Close changed a store that had no failed write: %d bytes, last commit at %d", len(h.data), h.commits[len(h.commits)-1].end)
	}
	return h
}

// TestATornTailOfZerosIsDropped is the other shape of an interrupted
// append: the file grew, but from some byte of the transaction on its data
// never reached the disk and reads as zeros. Every such image of every
// transaction after the snapshot opens at the commit before it, however
// few bytes the zeros are: an append that ends 1 to 31 bytes past a
// sector boundary, and loses that sector, is no damage.
func TestATornTailOfZerosIsDropped(t *testing.T) {
	log := logWithHistory(t)
	for tx := 1; tx < len(log.commits); tx++ {
		start, end := log.commits[tx-1].end, log.commits[tx].end
		for n := start; n < end; n++ {
			// As the file was when this transaction was the last append.
			data := durableTo(log.data[:end], start)
			clear(data[n:])
			c, err := openBytes(t, data)
			if err != nil {
				t.Fatalf("transaction %d zeroed from byte %d of %d..%d: %v", tx, n, start, end, err)
			}
			if got := viewKey(c.Capacity(), c.Pin()); got != viewKey(c.Capacity(), log.commits[tx-1].pin) {
				t.Fatalf("transaction %d zeroed from byte %d: opened at generation %d, want %d", tx, n, c.Generation(), log.commits[tx-1].view.Generation)
			}
		}
	}
}

func TestOpenCutsATornTailOffAndAppendsAfterTheLastCommit(t *testing.T) {
	log := logWithHistory(t)
	last := len(log.commits) - 1
	cut := (log.commits[last-1].end + log.commits[last].end) / 2
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFileName)
	if err := os.WriteFile(path, log.data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != int64(log.commits[last-1].end) {
		t.Fatalf("the torn tail was not cut off: %v %v", info.Size(), err)
	}
	g := mustDeploy(t, c, weighted("acme", "after", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, got, ok := c.Pin().Deployment("acme", "after"); !ok || got != g || c.Generation() != g {
		t.Fatalf("the deploy after the torn tail: %d %v at %d", got, ok, c.Generation())
	}
}

func TestADeployAppendsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := filepath.Join(dir, StoreFileName)
	size := func() int64 {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	var grew []int64
	for i := range 50 {
		before := size()
		mustDeploy(t, c, weighted(fmt.Sprintf("tenant-%03d", i), "svc", 3, 1))
		grew = append(grew, size()-before)
	}
	// Every deploy of a same-sized deployment appends the same bytes, however
	// many the store already holds.
	for i, g := range grew {
		if g != grew[0] {
			t.Fatalf("deploy %d appended %d bytes, the first %d", i, g, grew[0])
		}
	}
	want := deploymentBytes(c.Pin().lookup("tenant-000", "svc"))
	if grew[0] < want || grew[0] > want+commitBytes {
		t.Fatalf("a deploy appended %d bytes for a deployment of %d", grew[0], want)
	}
}

// TestRewritesKeepGarbageBelowTheLiveSet replaces and deletes deployments
// until the store has rewritten itself several times; the file never holds
// more garbage than live data (plus one change), and every reopen on the
// way is the catalog as it was.
func TestRewritesKeepGarbageBelowTheLiveSet(t *testing.T) {
	dir := t.TempDir()
	c, err := Create(dir, GenerousCapacity)
	if err != nil {
		t.Fatal(err)
	}
	c.store.rewriteFloor = 0
	path := filepath.Join(dir, StoreFileName)
	rewrites := 0
	var last int64
	sample, err := compileDeployment(&Deployment{Tenant: "acme", Service: "svc-00", Routes: weighted("acme", "svc-00", 1, 1).Routes}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	change := deploymentBytes(sample) + commitBytes
	for i := range 300 {
		key := fmt.Sprintf("svc-%02d", i%20)
		if i%7 == 6 {
			if _, err := c.Delete("acme", key); err != nil && !errors.Is(err, ErrNotDeployed) {
				t.Fatal(err)
			}
		} else {
			mustDeploy(t, c, weighted("acme", key, uint64(1+i%3), 1))
		}
		waitForCompaction(c)
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() < last {
			rewrites++
		}
		last = info.Size()
		live := c.store.header + c.store.live + commitBytes
		if garbage := info.Size() - live; garbage > c.store.live+2*change {
			t.Fatalf("after change %d the store holds %d bytes, %d of them live", i, info.Size(), live)
		}
		if info.Size() != c.store.end {
			t.Fatalf("file %d bytes, the store appends at %d", info.Size(), c.store.end)
		}
		if i%50 == 49 {
			want := snapshotView(t, c.Pin())
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if c, err = Open(dir); err != nil {
				t.Fatal(err)
			}
			c.store.rewriteFloor = 0
			if got := snapshotView(t, c.Pin()); !equalViews(got, want) {
				t.Fatalf("reopened after change %d at generation %d, want %d", i, got.Generation, want.Generation)
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if rewrites < 3 {
		t.Fatalf("%d rewrites in 300 changes to 20 deployments", rewrites)
	}
}

// durableTo returns a copy of store data whose durable-end slots both say
// the file was durable up to byte end, as they did while the transaction
// that begins there was the last append.
func durableTo(data []byte, end int) []byte {
	data = bytes.Clone(data)
	for i := range 2 {
		copy(data[slotAt(i):], encodeSlot(i, int64(end)))
	}
	return data
}

// TestZerosOverAnAcknowledgedTransactionAreDamage zeroes a store's log
// from every byte of every transaction but the last to its end, and cuts
// it there: each is refused as damage naming the byte, since an fsync had
// made that transaction durable before the last one was appended, and a
// crash tears only the append in flight. The same from any byte of the
// last transaction opens at the commit before it. Before the store kept
// its durable end, zeros over the last two transactions opened at the
// earlier commit, and the change dropped had its generation handed out
// again.
func TestZerosOverAnAcknowledgedTransactionAreDamage(t *testing.T) {
	log := logWithHistory(t)
	last := len(log.commits) - 1
	for tx := 1; tx <= last; tx++ {
		start, end := log.commits[tx-1].end, log.commits[tx].end
		for n := start; n < end; n++ {
			for _, how := range []string{"zeros", "cut"} {
				data := bytes.Clone(log.data)
				if how == "zeros" {
					clear(data[n:])
				} else {
					data = data[:n]
				}
				c, err := openBytes(t, data)
				if tx == last {
					if err != nil {
						t.Fatalf("%s from byte %d of the last transaction (%d..%d): %v", how, n, start, end, err)
					}
					if got := viewKey(c.Capacity(), c.Pin()); got != viewKey(c.Capacity(), log.commits[tx-1].pin) {
						t.Fatalf("%s from byte %d of the last transaction: opened at generation %d, want %d", how, n, c.Generation(), log.commits[tx-1].view.Generation)
					}
					continue
				}
				if c != nil {
					t.Fatalf("%s from byte %d of transaction %d (%d..%d), acknowledged before the last one, opened at generation %d",
						how, n, tx, start, end, c.Generation())
				}
				durable := log.commits[last-1].end
				if how == "cut" {
					assertStoreError(t, err, ErrTruncated, fmt.Sprintf("ends at byte %d, before byte %d", n, durable))
					continue
				}
				assertStoreError(t, err, ErrChecksumMismatch, fmt.Sprintf(", before byte %d, the end of an acknowledged transaction", durable))
				// The zeros named begin at n, or before it where the bytes
				// before n were zeros already.
				var se *StoreError
				errors.As(err, &se)
				var from int
				if _, serr := fmt.Sscanf(se.Detail, "zeros from byte %d,", &from); serr != nil || from < start || from > n || !allZero(log.data[from:n]) {
					t.Fatalf("zeros from byte %d of transaction %d: the error names %q", n, tx, se.Detail)
				}
			}
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestAFormat3StoreOpensAndAppendsUntilARewrite opens a store of format 3,
// which has no durable-end slots: it opens, takes appends as before, and
// the first rewrite makes it format 4.
func TestAFormat3StoreOpensAndAppendsUntilARewrite(t *testing.T) {
	capacity := GenerousCapacity
	dep, err := compileDeployment(&Deployment{Tenant: "acme", Service: "thumbs", Routes: weighted("acme", "thumbs", 1).Routes}, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := &recordWriter{buf: []byte(storeMagicV3)}
	header := binary.AppendUvarint(nil, storeVersionV3)
	header = binary.AppendUvarint(header, capacity.MaxRevisions)
	w.record(recordHeader, binary.AppendUvarint(header, capacity.MaxPolicyBytes))
	records, count, err := encodeChanges([]change{{key: DeploymentKey{"acme", "thumbs"}, dep: dep}})
	if err != nil {
		t.Fatal(err)
	}
	tx, _ := sealTransaction(records, count, 1, 1, chainStart(storeMagicV3, w.buf[len(storeMagicV3):]))
	dir := t.TempDir()
	path := filepath.Join(dir, StoreFileName)
	if err := os.WriteFile(path, append(w.buf, tx...), 0o600); err != nil {
		t.Fatal(err)
	}
	magic := func() string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data[:len(storeMagic)])
	}
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Generation() != 1 || c.Pin().Len() != 1 {
		t.Fatalf("a format 3 store opened at generation %d with %d deployments", c.Generation(), c.Pin().Len())
	}
	mustDeploy(t, c, weighted("globex", "render", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m := magic(); m != storeMagicV3 {
		t.Fatalf("an append changed the magic to %q", m)
	}
	c, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Generation() != 2 || c.Pin().Len() != 2 {
		t.Fatalf("reopened at generation %d with %d deployments", c.Generation(), c.Pin().Len())
	}
	if err := c.WriteStore(dir); err != nil {
		t.Fatal(err)
	}
	mustDeploy(t, c, weighted("initech", "jobs", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m := magic(); m != storeMagic {
		t.Fatalf("a rewrite left the magic %q", m)
	}
	c, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Generation() != 3 || c.Pin().Len() != 3 {
		t.Fatalf("reopened at generation %d with %d deployments", c.Generation(), c.Pin().Len())
	}
}
