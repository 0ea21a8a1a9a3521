package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"strings"
)

// decodedStore is what a store file holds: the view at its last commit,
// and where that commit ends.
type decodedStore struct {
	capacity Capacity
	pin      *Pin
	issued   uint64
	version  uint64
	// chain is the last commit's chain digest.
	chain [sha256.Size]byte
	// end is the offset after the last commit; bytes after it are a torn
	// tail, an append that never committed.
	end int
}

// decodeStore rebuilds a catalog view, and the highest generation the
// catalog had handed out, from store bytes of any supported version. It is
// [readStore] over bytes held in memory.
func decodeStore(data []byte) (*decodedStore, *formatError) {
	dec, ferr, err := readStore(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		// A bytes.Reader fails only if it holds fewer bytes than size.
		panic("catalog: reading store bytes from memory: " + err.Error())
	}
	return dec, ferr
}

// readStore rebuilds a catalog view, and the highest generation the
// catalog had handed out, from a store file of any supported version, size
// bytes long, read from r. Every deployment goes through the same
// compilation (and so the same validation) as a Deploy; a store that fails
// any check yields no view at all. A store may end in a torn
// tail, which is left out.
//
// It reads each transaction twice, and holds none of it: first to check
// every record and the commit's chain digest, then, once the commit has
// checked, again to apply it, checking the records and the chain once
// more (a file changed in between is refused). Besides the view built so
// far it holds a read window, one record, and, for the deployment it is
// reading, the deployment as a value plus 33 bytes per record of it.
// It stops at the first record that fails to check (reading on only to
// see whether the file ends in zeros there, a torn tail, and only while
// it does). A *formatError says what is wrong with the bytes; an error is
// a failure to read them.
func readStore(r io.ReaderAt, size int64) (*decodedStore, *formatError, error) {
	if size > maxStoreBytes {
		return nil, formatFailure(-1, ErrMalformed, "larger than the maximum store size"), nil
	}
	lr := newLogReader(r, size)
	magic := make([]byte, min(size, int64(len(storeMagic))))
	if err := lr.read(magic); err != nil {
		return nil, nil, err
	}
	if len(magic) < len(storeMagic) {
		if strings.HasPrefix(storeMagic, string(magic)) {
			return nil, formatFailure(-1, ErrTruncated, "shorter than the file header"), nil
		}
		return nil, formatFailure(-1, ErrMalformed, "not a catalog store"), nil
	}
	switch string(magic) {
	case storeMagicV3:
		return decodeLog(lr, storeMagicV3, storeVersionV3, 0)
	case storeMagic:
	default:
		return nil, formatFailure(-1, ErrMalformed, "not a catalog store"), nil
	}
	if size < preambleBytes {
		return nil, formatFailure(-1, ErrTruncated, "shorter than the file header"), nil
	}
	// The durable end: the larger of what the two slots say. An append
	// writes one of them; should that write be torn, the other still
	// holds a durable end, an earlier one. Both failing is damage.
	var slots [2 * slotBytes]byte
	if err := lr.read(slots[:]); err != nil {
		return nil, nil, err
	}
	durable, valid := int64(-1), false
	for i := range 2 {
		if end, ok := decodeSlot(i, slots[i*slotBytes:]); ok {
			durable, valid = max(durable, end), true
		}
	}
	if !valid {
		return nil, formatFailure(-1, ErrChecksumMismatch, "durable-end slots"), nil
	}
	return decodeLog(lr, storeMagic, storeVersion, durable)
}

// decodeLog reads a log after its magic (and, in format 4, its slots),
// whose magic and version are those given. The file was durable up to
// byte durable: a torn tail that begins before it is damage, not a crash.
func decodeLog(lr *logReader, magic string, wantVersion uint64, durable int64) (*decodedStore, *formatError, error) {
	header, torn, ferr, err := lr.readFrame(0)
	switch {
	case err != nil:
		return nil, nil, err
	case ferr != nil:
		return nil, ferr, nil
	case torn:
		return nil, formatFailure(0, ErrTruncated, "ends before the first commit"), nil
	case header.kind != recordHeader:
		return nil, formatFailure(0, ErrMalformed, "expected the header record"), nil
	}
	hr := &reader{b: header.payload}
	version := hr.uvarint()
	capacity := Capacity{MaxRevisions: hr.uvarint(), MaxPolicyBytes: hr.uvarint()}
	if version != wantVersion {
		return nil, formatFailure(0, ErrMalformed, "unsupported format version"), nil
	}
	if hr.end() != nil {
		return nil, formatFailure(0, ErrMalformed, "bad header record"), nil
	}
	h := sha256.New()
	out := &decodedStore{capacity: capacity, version: version}
	out.chain = chainStart(magic, header.raw)
	b := newViewBuilder(capacity)
	index := 1
	for first := true; ; first = false {
		if lr.at == lr.size && !first {
			break
		}
		// A transaction: its records up to and including the commit. The
		// first reading checks them and the commit, holding nothing; only
		// then does the second apply them.
		txStart, txIndex := lr.at, index
		count := 0
		h.Reset()
		h.Write(out.chain[:])
		var commit []byte
		for {
			f, torn, ferr, err := lr.readFrame(index)
			if err != nil {
				return nil, nil, err
			}
			if ferr != nil {
				return nil, ferr, nil
			}
			if torn {
				if first {
					return nil, formatFailure(index, ErrTruncated, "ends before the first commit"), nil
				}
				if ferr := beforeDurable(index, lr.tornAt, lr.size, durable); ferr != nil {
					return nil, ferr, nil
				}
				out.pin, out.issued = b.pin(), b.issued
				return out, nil, nil
			}
			index++
			if f.kind == recordCommit {
				commit = bytes.Clone(f.payload)
				break
			}
			h.Write(f.raw)
			count++
		}
		commitAt, commitEnd := index-1, lr.at
		cr := &reader{b: commit}
		generation, issued, records := cr.uvarint(), cr.uvarint(), cr.uvarint()
		if cr.err != nil || len(cr.b) != sha256.Size {
			return nil, formatFailure(commitAt, ErrMalformed, "bad commit record"), nil
		}
		if records != uint64(count) {
			return nil, formatFailure(commitAt, ErrMalformed, "record count mismatch"), nil
		}
		var chain [sha256.Size]byte
		h.Sum(chain[:0])
		if !bytes.Equal(chain[:], cr.b) {
			return nil, formatFailure(commitAt, ErrChecksumMismatch, "chain digest"), nil
		}
		lr.seek(txStart)
		h.Reset()
		h.Write(out.chain[:])
		sr := &storeReader{lr: lr, base: txIndex, count: count, chain: h, capacity: capacity}
		var ferr *formatError
		if first {
			ferr = b.snapshot(sr, generation)
		} else {
			ferr = b.transaction(sr, generation)
		}
		if sr.err != nil {
			return nil, nil, sr.err
		}
		if ferr == nil && sr.next != count {
			ferr = formatFailure(txIndex+sr.next, ErrMalformed, "unexpected record")
		}
		if ferr != nil {
			return nil, ferr, nil
		}
		var again [sha256.Size]byte
		if h.Sum(again[:0]); again != chain || lr.at != commitEnd-int64(frameBytes+len(commit)) {
			return nil, formatFailure(commitAt, ErrChecksumMismatch, "the transaction changed while it was read"), nil
		}
		lr.seek(commitEnd)
		if ferr := b.commit(generation, issued, commitAt); ferr != nil {
			return nil, ferr, nil
		}
		out.chain, out.end = chain, int(lr.at)
	}
	if ferr := beforeDurable(index, lr.size, lr.size, durable); ferr != nil {
		return nil, ferr, nil
	}
	out.pin, out.issued = b.pin(), b.issued
	return out, nil, nil
}

// beforeDurable is the damage of a file of size bytes whose readable log
// stops at byte at, record index, when it was durable up to byte durable:
// zeros, or the end of the file, over bytes an fsync had made durable. A
// crash tears only the append in flight, which begins at or after that
// byte; a tear that begins before it took a transaction already
// acknowledged, whose generation would be handed out again.
func beforeDurable(index int, at, size, durable int64) *formatError {
	switch {
	case at >= durable:
		return nil
	case at == size:
		return formatFailure(index, ErrTruncated, fmt.Sprintf(
			"ends at byte %d, before byte %d, the end of an acknowledged transaction", at, durable))
	}
	return formatFailure(index, ErrChecksumMismatch, fmt.Sprintf(
		"zeros from byte %d, before byte %d, the end of an acknowledged transaction", at, durable))
}

// viewBuilder applies the transactions of a store to a view under one
// edit token: nothing it builds is visible before it is done, and a store
// that fails a check is refused whole.
type viewBuilder struct {
	capacity   Capacity
	index      index
	usage      CapacityUse
	edit       uint64
	generation uint64 // of the last commit
	issued     uint64 // of the last commit
	committed  bool
	// latest is the generation of the snapshot's last deployment so far:
	// a snapshot lists them oldest first (one Apply gives many deployments
	// one generation).
	latest uint64
}

func newViewBuilder(capacity Capacity) *viewBuilder {
	return &viewBuilder{capacity: capacity, index: emptyIndex(), edit: newEditToken()}
}

func (b *viewBuilder) pin() *Pin {
	return &Pin{generation: b.generation, index: b.index, usage: b.usage}
}

func (b *viewBuilder) put(dep *deployment) {
	var old *deployment
	b.index, old = b.index.put(keyHash(dep.tenant, dep.service), dep, b.edit)
	if old != nil {
		b.usage.Revisions -= old.usage.Revisions
		b.usage.PolicyBytes -= old.usage.PolicyBytes
	}
	b.usage.Revisions += dep.usage.Revisions
	b.usage.PolicyBytes += dep.usage.PolicyBytes
}

// snapshotDeployment adds dep, read from record at of a snapshot committed
// at generation.
func (b *viewBuilder) snapshotDeployment(dep *deployment, generation uint64, at int) *formatError {
	switch {
	case dep.generation == 0 || dep.generation > generation:
		return formatFailure(at, ErrMalformed, "deployment generation outside the catalog's")
	case dep.generation < b.latest:
		return formatFailure(at, ErrMalformed, "deployment generations out of order")
	case b.index.get(keyHash(dep.tenant, dep.service), dep.tenant, dep.service) != nil:
		return formatFailure(at, ErrMalformed, "deployment repeated")
	}
	b.put(dep)
	b.latest = dep.generation
	return nil
}

// snapshot applies the records of the first transaction, which hold every
// deployment of the view at its own generation, oldest first.
func (b *viewBuilder) snapshot(sr *storeReader, generation uint64) *formatError {
	for sr.more() {
		at := sr.base + sr.next
		dep, ferr := sr.deployment()
		if ferr != nil {
			return ferr
		}
		if ferr := b.snapshotDeployment(dep, generation, at); ferr != nil {
			return ferr
		}
	}
	return nil
}

// transaction applies the records of a later transaction, one change at
// generation: deployments at that generation and deletes, each pair at
// most once.
func (b *viewBuilder) transaction(sr *storeReader, generation uint64) *formatError {
	if generation <= b.issued {
		return formatFailure(sr.base+sr.count, ErrMalformed, "generation not above every earlier one")
	}
	if sr.count == 0 {
		return formatFailure(sr.base, ErrMalformed, "empty transaction")
	}
	touched := make(map[DeploymentKey]bool)
	for sr.more() {
		at := sr.base + sr.next
		f, ferr := sr.peek()
		if ferr != nil {
			return ferr
		}
		var key DeploymentKey
		switch f.kind {
		case recordDeploy:
			dep, ferr := sr.deployment()
			if ferr != nil {
				return ferr
			}
			if dep.generation != generation {
				return formatFailure(at, ErrMalformed, "deployment generation is not its commit's")
			}
			key = DeploymentKey{dep.tenant, dep.service}
			if touched[key] {
				return formatFailure(at, ErrMalformed, "deployment repeated")
			}
			b.put(dep)
		case recordDelete:
			r := &reader{b: f.payload}
			key = DeploymentKey{Tenant: r.string(), Service: r.string()}
			if r.end() != nil || !bytes.Equal(deletePayload(key), f.payload) {
				return formatFailure(at, ErrMalformed, "bad delete record")
			}
			sr.skip()
			if touched[key] {
				return formatFailure(at, ErrMalformed, "deployment repeated")
			}
			var old *deployment
			b.index, old = b.index.remove(keyHash(key.Tenant, key.Service), key.Tenant, key.Service, b.edit)
			if old == nil {
				return formatFailure(at, ErrMalformed, "delete of a deployment that is not there")
			}
			b.usage.Revisions -= old.usage.Revisions
			b.usage.PolicyBytes -= old.usage.PolicyBytes
		default:
			return formatFailure(at, ErrMalformed, "unexpected record")
		}
		touched[key] = true
	}
	return nil
}

// commit checks the view after a transaction committed at generation with
// the highest generation handed out issued, from record at.
func (b *viewBuilder) commit(generation, issued uint64, at int) *formatError {
	switch {
	case issued < generation:
		return formatFailure(at, ErrMalformed, "issued generation below the catalog's")
	case b.committed && generation <= b.issued:
		return formatFailure(at, ErrMalformed, "generation not above every earlier one")
	case b.usage.Revisions > b.capacity.MaxRevisions || b.usage.PolicyBytes > b.capacity.MaxPolicyBytes:
		return formatFailure(-1, ErrMalformed, "deployments exceed the capacity")
	}
	b.generation, b.issued, b.committed = generation, issued, true
	return nil
}

// storeReader reads the records of one transaction, whose commit has
// checked, a second time, to apply them: count records from the file's
// record base on. It checks each record again and feeds it to chain, so
// the caller can tell that they are the bytes the commit vouched for. It
// holds one record at a time (peek reads it, skip or take moves past it).
type storeReader struct {
	lr       *logReader
	base     int // file index of the transaction's first record
	count    int // records in the transaction, its commit left out
	next     int // records moved past
	chain    hash.Hash
	capacity Capacity
	cur      frame
	have     bool
	// err is a failure to read the file; the *formatError returned with
	// it only stops the reading.
	err error
}

// more reports whether the transaction has records left.
func (s *storeReader) more() bool { return s.next < s.count }

// peek returns the next record, reading it if need be; it is valid until
// the next call that moves past it.
func (s *storeReader) peek() (frame, *formatError) {
	if s.have {
		return s.cur, nil
	}
	at := s.base + s.next
	if !s.more() {
		return frame{}, formatFailure(at, ErrMalformed, "unexpected end of the transaction")
	}
	f, torn, ferr, err := s.lr.readFrame(at)
	switch {
	case err != nil:
		s.err = err
		return frame{}, formatFailure(at, ErrMalformed, "read failure")
	case ferr != nil:
		return frame{}, ferr
	case torn || f.kind == recordCommit:
		return frame{}, formatFailure(at, ErrChecksumMismatch, "the transaction changed while it was read")
	}
	s.chain.Write(f.raw)
	s.cur, s.have = f, true
	return f, nil
}

// skip moves past the record peek returned.
func (s *storeReader) skip() {
	s.have = false
	s.next++
}

// take returns the next record if it is of the wanted kind, its index in
// the transaction, and its sum. The reader is valid until the next read.
func (s *storeReader) take(kind byte, what string) (*reader, int, recordSum, *formatError) {
	at := s.next
	if !s.more() {
		return nil, at, recordSum{}, formatFailure(s.base+at, ErrMalformed, "expected a "+what+" record")
	}
	f, ferr := s.peek()
	if ferr != nil {
		return nil, at, recordSum{}, ferr
	}
	if f.kind != kind {
		return nil, at, recordSum{}, formatFailure(s.base+at, ErrMalformed, "expected a "+what+" record")
	}
	sum := recordSum{kind: kind}
	copy(sum.sum[:], f.raw[len(f.raw)-sha256.Size:])
	s.skip()
	return &reader{b: f.payload}, at, sum, nil
}

// recordSum is what a deployment's reading keeps of each of its records
// to check, once the deployment is compiled, that the record is the one
// the writer would write: its kind and SHA-256, which the frame checked.
type recordSum struct {
	kind byte
	sum  [sha256.Size]byte
}

// deployment reads one deployment record and its route and revision
// records. Counts are not trusted for allocation: each item consumes a
// record, so the loops end with the records; and the revisions of one
// deployment stop at the capacity's, since a view holds no more.
func (s *storeReader) deployment() (*deployment, *formatError) {
	r, at, sum, ferr := s.take(recordDeploy, "deployment")
	if ferr != nil {
		return nil, ferr
	}
	sums := []recordSum{sum}
	spec := Deployment{Tenant: r.string(), Service: r.string()}
	generation := r.uvarint()
	routes := r.uvarint()
	if r.end() != nil {
		return nil, formatFailure(s.base+at, ErrMalformed, "bad deployment record")
	}
	var revisionCount uint64
	for i := uint64(0); i < routes; i++ {
		rr, rat, sum, ferr := s.take(recordRoute, "route")
		if ferr != nil {
			return nil, ferr
		}
		sums = append(sums, sum)
		rt := Route{Name: rr.string(), Contract: rr.string(), Function: rr.string()}
		revisions := rr.uvarint()
		if rr.end() != nil {
			return nil, formatFailure(s.base+rat, ErrMalformed, "bad route record")
		}
		for j := uint64(0); j < revisions; j++ {
			vr, vat, sum, ferr := s.take(recordRevision, "revision")
			if ferr != nil {
				return nil, ferr
			}
			sums = append(sums, sum)
			if revisionCount++; revisionCount > s.capacity.MaxRevisions {
				return nil, formatFailure(s.base+vat, ErrMalformed, "deployments exceed the capacity")
			}
			rev, err := readRevisionRecord(vr.b)
			if err != nil {
				return nil, formatFailure(s.base+vat, ErrMalformed, "bad revision record")
			}
			rt.Revisions = append(rt.Revisions, rev)
		}
		spec.Routes = append(spec.Routes, rt)
	}
	dep, err := compileDeployment(&spec, generation)
	if err != nil {
		return nil, formatFailure(s.base+at, ErrMalformed, "invalid deployment")
	}
	// The writer only writes normalized records; anything else was not
	// written by it, and would not survive a rewrite byte for byte. The
	// checked SHA-256 of each record stands for its bytes.
	k := 0
	var canonical *formatError
	h := sha256.New()
	var regenerated [sha256.Size]byte
	deploymentPayloads(dep, func(kind byte, payload []byte) {
		if canonical != nil {
			return
		}
		h.Reset()
		var kl [5]byte
		kl[0] = kind
		binary.BigEndian.PutUint32(kl[1:], uint32(len(payload)))
		h.Write(kl[:])
		h.Write(payload)
		h.Sum(regenerated[:0])
		if k >= len(sums) || sums[k].kind != kind || sums[k].sum != regenerated {
			detail := "non-canonical revision record"
			if k >= len(sums) || sums[k].kind != recordRevision {
				detail = "non-canonical record"
			}
			canonical = formatFailure(s.base+at+k, ErrMalformed, detail)
		}
		k++
	})
	return dep, canonical
}
