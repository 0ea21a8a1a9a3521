package catalog

import (
	"bufio"
	"bytes"
	"crypto/sha256"
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
	// chain is the last commit's chain digest (format 3 only).
	chain [sha256.Size]byte
	// end is the offset after the last commit; bytes after it are a torn
	// tail, an append that never committed (format 3 only).
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
// bytes long, read from r once, front to back. Every deployment goes
// through the same compilation (and so the same validation) as a Deploy;
// a store that fails any check yields no view at all. A format 3 store
// may end in a torn tail, which is left out. It stops at the first record
// that fails to check (reading on only to see whether the file ends in
// zeros there, a torn tail, and only while it does), and holds no more
// than the view built so far and the records of one transaction. A
// *formatError says what is wrong with the bytes; an error is a failure to
// read them.
func readStore(r io.Reader, size int64) (*decodedStore, *formatError, error) {
	if size > maxStoreBytes {
		return nil, formatFailure(-1, ErrMalformed, "larger than the maximum store size"), nil
	}
	lr := &logReader{r: bufio.NewReaderSize(io.LimitReader(r, size), 64<<10), size: size}
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
	case storeMagic:
		return decodeLog(lr)
	}
	return nil, formatFailure(-1, ErrMalformed, "not a catalog store"), nil
}

func decodeLog(lr *logReader) (*decodedStore, *formatError, error) {
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
	if version != storeVersion {
		return nil, formatFailure(0, ErrMalformed, "unsupported format version"), nil
	}
	if hr.end() != nil {
		return nil, formatFailure(0, ErrMalformed, "bad header record"), nil
	}
	h := sha256.New()
	h.Write([]byte(storeMagic))
	h.Write(header.raw)
	out := &decodedStore{capacity: capacity, version: version}
	h.Sum(out.chain[:0])
	b := newViewBuilder(capacity)
	index := 1
	for first := true; ; first = false {
		if lr.at == lr.size && !first {
			break
		}
		// A transaction: its records up to and including the commit. None
		// of it is interpreted until the commit has checked; its records
		// are the only ones held besides the view.
		txIndex := index
		var records []frame
		var commit frame
		commitAt := 0
		h.Reset()
		h.Write(out.chain[:])
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
				out.pin, out.issued = b.pin(), b.issued
				return out, nil, nil
			}
			index++
			if f.kind == recordCommit {
				commit, commitAt = f, index-1
				break
			}
			h.Write(f.raw)
			f.raw = nil
			records = append(records, f)
		}
		cr := &reader{b: commit.payload}
		generation, issued, count := cr.uvarint(), cr.uvarint(), cr.uvarint()
		if cr.err != nil || len(cr.b) != sha256.Size {
			return nil, formatFailure(commitAt, ErrMalformed, "bad commit record"), nil
		}
		if count != uint64(len(records)) {
			return nil, formatFailure(commitAt, ErrMalformed, "record count mismatch"), nil
		}
		var chain [sha256.Size]byte
		h.Sum(chain[:0])
		if !bytes.Equal(chain[:], cr.b) {
			return nil, formatFailure(commitAt, ErrChecksumMismatch, "chain digest"), nil
		}
		var ferr *formatError
		if first {
			ferr = b.snapshot(records, txIndex, generation)
		} else {
			ferr = b.transaction(records, txIndex, generation)
		}
		if ferr == nil {
			ferr = b.commit(generation, issued, commitAt)
		}
		if ferr != nil {
			return nil, ferr, nil
		}
		out.chain, out.end = chain, int(lr.at)
	}
	out.pin, out.issued = b.pin(), b.issued
	return out, nil, nil
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
func (b *viewBuilder) snapshot(records []frame, base int, generation uint64) *formatError {
	sr := &storeReader{frames: records, base: base}
	for sr.next < len(records) {
		at := base + sr.next
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
func (b *viewBuilder) transaction(records []frame, base int, generation uint64) *formatError {
	if generation <= b.issued {
		return formatFailure(base+len(records), ErrMalformed, "generation not above every earlier one")
	}
	if len(records) == 0 {
		return formatFailure(base, ErrMalformed, "empty transaction")
	}
	touched := make(map[DeploymentKey]bool)
	sr := &storeReader{frames: records, base: base}
	for sr.next < len(records) {
		at := base + sr.next
		var key DeploymentKey
		switch records[sr.next].kind {
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
			r := &reader{b: records[sr.next].payload}
			key = DeploymentKey{Tenant: r.string(), Service: r.string()}
			if r.end() != nil || !bytes.Equal(deletePayload(key), records[sr.next].payload) {
				return formatFailure(at, ErrMalformed, "bad delete record")
			}
			sr.next++
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

// storeReader reads deployments from a run of records; base is the file
// index of frames[0].
type storeReader struct {
	frames []frame
	next   int
	base   int
}

// take returns the next record if it is of the wanted kind.
func (s *storeReader) take(kind byte, what string) (*reader, int, *formatError) {
	if s.next >= len(s.frames) || s.frames[s.next].kind != kind {
		return nil, s.next, formatFailure(s.base+s.next, ErrMalformed, "expected a "+what+" record")
	}
	s.next++
	return &reader{b: s.frames[s.next-1].payload}, s.next - 1, nil
}

// deployment reads one deployment record and its route and revision
// records. Counts are not trusted for allocation: each item consumes a
// record, so the loops end with the records.
func (s *storeReader) deployment() (*deployment, *formatError) {
	start := s.next
	r, at, ferr := s.take(recordDeploy, "deployment")
	if ferr != nil {
		return nil, ferr
	}
	spec := Deployment{Tenant: r.string(), Service: r.string()}
	generation := r.uvarint()
	routes := r.uvarint()
	if r.end() != nil {
		return nil, formatFailure(s.base+at, ErrMalformed, "bad deployment record")
	}
	for i := uint64(0); i < routes; i++ {
		rr, rat, ferr := s.take(recordRoute, "route")
		if ferr != nil {
			return nil, ferr
		}
		rt := Route{Name: rr.string(), Contract: rr.string(), Function: rr.string()}
		revisions := rr.uvarint()
		if rr.end() != nil {
			return nil, formatFailure(s.base+rat, ErrMalformed, "bad route record")
		}
		for j := uint64(0); j < revisions; j++ {
			vr, vat, ferr := s.take(recordRevision, "revision")
			if ferr != nil {
				return nil, ferr
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
	// written by it, and would not survive a rewrite byte for byte.
	k := start
	var canonical *formatError
	deploymentPayloads(dep, func(_ byte, payload []byte) {
		if canonical == nil && !bytes.Equal(payload, s.frames[k].payload) {
			detail := "non-canonical revision record"
			if s.frames[k].kind != recordRevision {
				detail = "non-canonical record"
			}
			canonical = formatFailure(s.base+k, ErrMalformed, detail)
		}
		k++
	})
	return dep, canonical
}
