package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
)

// Store file layout, format version 3 (see doc.go, "Store format"):
//
//	file        = magic header transaction...
//	record      = kind(1) length(4, big endian) crc32c(kind|length)(4)
//	              payload(length) sha256(kind|length|payload)(32)
//	transaction = change... commit
//	change      = deployment route... revision... | delete
//
// The first transaction is the snapshot a rewrite wrote: every deployment
// of the view, oldest generation first, each at its own generation. Every
// later transaction is one change of the catalog (a Deploy, a Delete or an
// Apply) appended at the end: its deployments at the commit's generation,
// its deletes by (tenant, service). A commit records the generation, the
// highest generation handed out, the number of records of its transaction
// and a chain digest: SHA-256 of the previous commit's digest (for the
// snapshot, SHA-256 of the magic and header) followed by the bytes of the
// transaction's records.
const (
	storeMagic     = "LATCAT\x00\x03"
	storeVersion   = 3
	recordHeader   = 'H'
	recordDeploy   = 'D'
	recordRoute    = 'R'
	recordRevision = 'V'
	recordDelete   = 'X'
	recordCommit   = 'C'
	// frameHeaderBytes is kind, length and the CRC that vouches for them,
	// so a damaged length is told from a file that ends early.
	frameHeaderBytes = 1 + 4 + 4
	frameBytes       = frameHeaderBytes + sha256.Size
	// maxRecordBytes bounds one record so a damaged length field cannot
	// make the reader trust a huge span.
	maxRecordBytes = 1 << 24
)

var (
	errRecordTooLarge = errors.New("catalog: a store record would exceed the record size limit")
	castagnoli        = crc32.MakeTable(crc32.Castagnoli)
)

// recordWriter frames records into buf.
type recordWriter struct {
	buf      []byte
	records  int
	tooLarge bool
}

func (w *recordWriter) record(kind byte, payload []byte) {
	if len(payload) > maxRecordBytes {
		w.tooLarge = true
		return
	}
	start := len(w.buf)
	w.buf = append(w.buf, kind)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(payload)))
	w.buf = binary.BigEndian.AppendUint32(w.buf, crc32.Checksum(w.buf[start:start+5], castagnoli))
	w.buf = append(w.buf, payload...)
	h := sha256.New()
	h.Write(w.buf[start : start+5])
	h.Write(w.buf[start+frameHeaderBytes:])
	w.buf = h.Sum(w.buf)
	w.records++
}

// deploymentPayloads calls emit with the kind and payload of each record
// of dep in order: its deployment record, then per route its route record
// and its revision records. The payload is only valid during the call.
func deploymentPayloads(dep *deployment, emit func(kind byte, payload []byte)) {
	var b []byte
	b = appendString(b, dep.tenant)
	b = appendString(b, dep.service)
	b = binary.AppendUvarint(b, dep.generation)
	b = binary.AppendUvarint(b, uint64(len(dep.routes)))
	emit(recordDeploy, b)
	for i := range dep.routes {
		rt := &dep.routes[i]
		b = appendString(b[:0], rt.name)
		b = appendString(b, rt.contract)
		b = appendString(b, rt.function)
		b = binary.AppendUvarint(b, uint64(len(rt.revisions)))
		emit(recordRoute, b)
		for j := range rt.revisions {
			b = appendRevisionRecord(b[:0], &rt.revisions[j].spec)
			emit(recordRevision, b)
		}
	}
}

// deploymentBytes is the length of dep's records in a store file.
func deploymentBytes(dep *deployment) int64 {
	var n int64
	deploymentPayloads(dep, func(_ byte, payload []byte) { n += int64(frameBytes + len(payload)) })
	return n
}

func (w *recordWriter) deployment(dep *deployment) {
	deploymentPayloads(dep, w.record)
}

func deletePayload(key DeploymentKey) []byte {
	return appendString(appendString(nil, key.Tenant), key.Service)
}

func headerPayload(capacity Capacity) []byte {
	b := binary.AppendUvarint(nil, storeVersion)
	b = binary.AppendUvarint(b, capacity.MaxRevisions)
	return binary.AppendUvarint(b, capacity.MaxPolicyBytes)
}

func commitPayload(generation, issued uint64, records int, chain [sha256.Size]byte) []byte {
	b := binary.AppendUvarint(nil, generation)
	b = binary.AppendUvarint(b, issued)
	b = binary.AppendUvarint(b, uint64(records))
	return append(b, chain[:]...)
}

// commitBytes bounds the length of a commit record: three varints of at
// most 10 bytes and the digest.
const commitBytes = frameBytes + 3*binary.MaxVarintLen64 + sha256.Size

// chainNext is the chain digest of a transaction whose records are tx,
// following a commit whose digest is prev.
func chainNext(prev [sha256.Size]byte, tx []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(tx)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// encodeSnapshot encodes a whole catalog view as a fresh store file: the
// header and one transaction holding every deployment, committed at the
// view's generation with issued, the highest generation the catalog has
// handed out (at least the view's own). It returns the file and its last
// chain digest.
func encodeSnapshot(capacity Capacity, pin *Pin, issued uint64) ([]byte, [sha256.Size]byte, error) {
	issued = max(issued, pin.generation)
	deps := make([]*deployment, 0, pin.index.count)
	pin.index.each(func(d *deployment) { deps = append(deps, d) })
	slices.SortFunc(deps, func(a, b *deployment) int {
		if c := compareUint64(a.generation, b.generation); c != 0 {
			return c
		}
		if a.tenant != b.tenant {
			return strings.Compare(a.tenant, b.tenant)
		}
		return strings.Compare(a.service, b.service)
	})
	w := &recordWriter{buf: []byte(storeMagic)}
	w.record(recordHeader, headerPayload(capacity))
	chain := sha256.Sum256(w.buf)
	start := len(w.buf)
	w.records = 0
	for _, dep := range deps {
		w.deployment(dep)
	}
	chain = chainNext(chain, w.buf[start:])
	w.record(recordCommit, commitPayload(pin.generation, issued, w.records, chain))
	if w.tooLarge {
		return nil, chain, errRecordTooLarge
	}
	return w.buf, chain, nil
}

// encodeTransaction encodes changes as one transaction to append to a
// store whose last commit has the chain digest prev, and returns it with
// its own chain digest.
func encodeTransaction(changes []change, generation, issued uint64, prev [sha256.Size]byte) ([]byte, [sha256.Size]byte, error) {
	w := &recordWriter{}
	for i := range changes {
		if ch := &changes[i]; ch.dep != nil {
			w.deployment(ch.dep)
		} else {
			w.record(recordDelete, deletePayload(ch.key))
		}
	}
	chain := chainNext(prev, w.buf)
	w.record(recordCommit, commitPayload(generation, issued, w.records, chain))
	if w.tooLarge {
		return nil, chain, errRecordTooLarge
	}
	return w.buf, chain, nil
}

func compareUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// frame is one checksummed record of a store file.
type frame struct {
	kind    byte
	payload []byte
}

// formatError says what is wrong with store bytes; Open adds the file.
type formatError struct {
	record int // -1 when no record is to blame
	reason error
	detail string
}

func formatFailure(record int, reason error, detail string) *formatError {
	return &formatError{record: record, reason: reason, detail: detail}
}

// readFrame reads the record that starts at data[at:], record number
// index of the file, and returns it with the offset after it. torn
// reports what an interrupted append leaves instead of a record: the file
// ends inside it, or it fails to check and the file ends in zero bytes
// that begin inside it (a file that grew before all of its data reached
// the disk). Anything else that fails to check is damage, a
// *formatError: a crash does not write bytes the writer never wrote.
func readFrame(data []byte, at, index int) (f frame, next int, torn bool, ferr *formatError) {
	rest := data[at:]
	if len(rest) < frameHeaderBytes {
		return frame{}, 0, true, nil
	}
	if crc32.Checksum(rest[:5], castagnoli) != binary.BigEndian.Uint32(rest[5:]) {
		if zeroedFrom(data, at, at+frameHeaderBytes) {
			return frame{}, 0, true, nil
		}
		return frame{}, 0, false, formatFailure(index, ErrChecksumMismatch, "record header")
	}
	length := binary.BigEndian.Uint32(rest[1:])
	if length > maxRecordBytes {
		return frame{}, 0, false, formatFailure(index, ErrMalformed, "record length over the limit")
	}
	bodyEnd := frameHeaderBytes + int(length)
	if len(rest) < bodyEnd+sha256.Size {
		return frame{}, 0, true, nil
	}
	h := sha256.New()
	h.Write(rest[:5])
	h.Write(rest[frameHeaderBytes:bodyEnd])
	var sum [sha256.Size]byte
	if !bytes.Equal(h.Sum(sum[:0]), rest[bodyEnd:bodyEnd+sha256.Size]) {
		if zeroedFrom(data, at, at+bodyEnd+sha256.Size) {
			return frame{}, 0, true, nil
		}
		return frame{}, 0, false, formatFailure(index, ErrChecksumMismatch, "")
	}
	return frame{kind: rest[0], payload: rest[frameHeaderBytes:bodyEnd]}, at + bodyEnd + sha256.Size, false, nil
}

// zeroedFrom reports whether data ends in a run of zero bytes that begins
// inside [start, end), the span of a record that failed to check, and
// either covers the whole record from start or is at least a checksum
// long. A single damaged byte cannot make such a run: a committed store
// ends in a SHA-256.
func zeroedFrom(data []byte, start, end int) bool {
	zeros := len(data)
	for zeros > start && data[zeros-1] == 0 {
		zeros--
	}
	return zeros < end && (zeros == start || len(data)-zeros >= sha256.Size)
}
