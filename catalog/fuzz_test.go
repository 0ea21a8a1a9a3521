package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// reseal recomputes every checksum of a format 4 store that it can find,
// the record headers' CRCs, the records' SHA-256 and the commits' chain
// digests, so the fuzzer reaches the content checks behind them instead
// of stopping at the first checksum it cannot forge.
func reseal(data []byte) []byte {
	data = bytes.Clone(data)
	if !bytes.HasPrefix(data, []byte(storeMagic)) || len(data) < preambleBytes {
		return data
	}
	// The slots keep what they say, with their CRCs made right.
	for i := range 2 {
		end := int64(binary.BigEndian.Uint64(data[slotAt(i):]))
		copy(data[slotAt(i):], encodeSlot(i, end))
	}
	var chain [sha256.Size]byte
	txStart := -1
	for at := preambleBytes; at+frameBytes <= len(data); {
		length := int(binary.BigEndian.Uint32(data[at+1:]))
		if length > len(data)-at-frameBytes {
			break
		}
		binary.BigEndian.PutUint32(data[at+5:], crc32.Checksum(data[at:at+5], castagnoli))
		bodyEnd := at + frameHeaderBytes + length
		if data[at] == recordCommit && txStart >= 0 && length >= sha256.Size {
			chain = chainNext(chain, data[txStart:at])
			copy(data[bodyEnd-sha256.Size:bodyEnd], chain[:])
		}
		h := sha256.New()
		h.Write(data[at : at+5])
		h.Write(data[at+frameHeaderBytes : bodyEnd])
		copy(data[bodyEnd:], h.Sum(nil))
		next := bodyEnd + sha256.Size
		if txStart < 0 {
			chain = chainStart(storeMagic, data[at:next])
		}
		if txStart < 0 || data[at] == recordCommit {
			txStart = next
		}
		at = next
	}
	return data
}

func FuzzOpenStore(f *testing.F) {
	c, err := FromFile(goodFile(f))
	if err != nil {
		f.Fatal(err)
	}
	full, _, _ := encodeSnapshot(c.Capacity(), c.Pin(), c.Generation())
	empty, _, _ := encodeSnapshot(GenerousCapacity, emptyPin(0), 0)
	small := New(GenerousCapacity)
	mustDeploy(f, small, weighted("acme", "thumbs", 3, 0, 1))
	one, _, _ := encodeSnapshot(GenerousCapacity, small.Pin(), small.Generation()+5)
	seeds := [][]byte{full, empty, one, nil, []byte(storeMagic), one[:len(one)/2]}
	// A store with appended transactions (deploys, a replacement, a delete
	// and an Apply) and its torn variants.
	log := logWithHistory(f)
	seeds = append(seeds, log.data, log.data[:len(log.data)-3], append(bytes.Clone(log.data), make([]byte, 50)...))
	for _, seed := range seeds {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, resealed bool) {
		if resealed {
			data = reseal(data)
		}
		dec, ferr := decodeStore(data)
		if ferr != nil {
			if dec != nil || ferr.reason == nil {
				t.Fatalf("a refusal returned a view or no reason: %+v", ferr)
			}
			return
		}
		if dec.version == storeVersion && (dec.end > len(data) || dec.end < len(storeMagic)) {
			t.Fatalf("the last commit ends at %d of %d bytes", dec.end, len(data))
		}
		// Whatever opens must survive a rewrite unchanged.
		again, _, err := encodeSnapshot(dec.capacity, dec.pin, dec.issued)
		if err != nil {
			t.Fatal(err)
		}
		dec2, ferr := decodeStore(again)
		if ferr != nil {
			t.Fatalf("a rewritten store does not open: %+v", ferr)
		}
		if dec.capacity != dec2.capacity || dec.issued != dec2.issued || !reflect.DeepEqual(snapshotView(t, dec.pin), snapshotView(t, dec2.pin)) {
			t.Fatal("a rewritten store opens differently")
		}
		// And a format 4 store's committed prefix opens as the same view.
		if dec.version == storeVersion {
			dec3, ferr := decodeStore(data[:dec.end])
			if ferr != nil || dec3.end != dec.end || !reflect.DeepEqual(snapshotView(t, dec.pin), snapshotView(t, dec3.pin)) {
				t.Fatalf("the committed prefix opens differently: %+v", ferr)
			}
		}
	})
}

func FuzzDecodeCatalog(f *testing.F) {
	for _, name := range []string{"good.json", "bad.json", "node-mismatch.json"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "catalog", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, true)
		f.Add(data, false)
	}
	f.Add([]byte(`{"deployments": []}`), false)
	f.Add([]byte(`{"capacity": {"max_revisions": 1, "max_policy_bytes": 1}, "deployments": [{}]}`), true)
	f.Fuzz(func(t *testing.T, data []byte, requireCapacity bool) {
		file, err := DecodeCatalogFile(data, requireCapacity)
		if err != nil {
			return
		}
		// A file that validates deploys, and survives the store.
		c, err := FromFile(file)
		if err != nil {
			t.Fatalf("a valid file does not deploy: %v", err)
		}
		stored, _, err := encodeSnapshot(c.Capacity(), c.Pin(), c.Generation())
		if err != nil {
			t.Fatal(err)
		}
		dec, ferr := decodeStore(stored)
		if ferr != nil {
			t.Fatalf("a valid catalog does not reopen: %+v", ferr)
		}
		if !reflect.DeepEqual(snapshotView(t, c.Pin()), snapshotView(t, dec.pin)) {
			t.Fatal("a valid catalog reopens differently")
		}
	})
}
