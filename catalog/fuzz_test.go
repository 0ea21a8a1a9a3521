package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// reseal recomputes every checksum of data that it can find, so the fuzzer
// reaches the content checks behind them instead of stopping at the first
// SHA-256 it cannot forge.
func reseal(data []byte) []byte {
	data = bytes.Clone(data)
	at := len(storeMagic)
	for at+frameBytes <= len(data) {
		length := int(binary.BigEndian.Uint32(data[at+1:]))
		if length > len(data)-at-frameBytes {
			break
		}
		bodyEnd := at + 5 + length
		if data[at] == recordEnd && length >= sha256.Size {
			digest := sha256.Sum256(data[:at])
			copy(data[bodyEnd-sha256.Size:bodyEnd], digest[:])
		}
		sum := sha256.Sum256(data[at:bodyEnd])
		copy(data[bodyEnd:], sum[:])
		at = bodyEnd + sha256.Size
	}
	return data
}

func FuzzOpenStore(f *testing.F) {
	c, err := FromFile(goodFile(f))
	if err != nil {
		f.Fatal(err)
	}
	full, _ := encodeStore(c.Capacity(), c.Pin(), c.Generation())
	empty, _ := encodeStore(GenerousCapacity, emptyPin(0), 0)
	small := New(GenerousCapacity)
	mustDeploy(f, small, weighted("acme", "thumbs", 3, 0, 1))
	one, _ := encodeStore(GenerousCapacity, small.Pin(), small.Generation()+5)
	for _, seed := range [][]byte{full, empty, one, nil, []byte(storeMagic), one[:len(one)/2]} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, resealed bool) {
		if resealed {
			data = reseal(data)
		}
		capacity, pin, issued, ferr := decodeStore(data)
		if ferr != nil {
			if pin != nil || ferr.reason == nil {
				t.Fatalf("a refusal returned a view or no reason: %+v", ferr)
			}
			return
		}
		// Whatever opens must survive a rewrite unchanged.
		again, err := encodeStore(capacity, pin, issued)
		if err != nil {
			t.Fatal(err)
		}
		capacity2, pin2, issued2, ferr := decodeStore(again)
		if ferr != nil {
			t.Fatalf("a rewritten store does not open: %+v", ferr)
		}
		if capacity != capacity2 || issued != issued2 || !reflect.DeepEqual(snapshotView(t, pin), snapshotView(t, pin2)) {
			t.Fatal("a rewritten store opens differently")
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
		stored, err := encodeStore(c.Capacity(), c.Pin(), c.Generation())
		if err != nil {
			t.Fatal(err)
		}
		_, pin, _, ferr := decodeStore(stored)
		if ferr != nil {
			t.Fatalf("a valid catalog does not reopen: %+v", ferr)
		}
		if !reflect.DeepEqual(snapshotView(t, c.Pin()), snapshotView(t, pin)) {
			t.Fatal("a valid catalog reopens differently")
		}
	})
}
