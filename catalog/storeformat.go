package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"strings"
)

// Store file layout, format version 4 (see docs/catalog-store.md):
//
//	file        = magic slot slot header transaction...
//	slot        = durable end(8, big endian) crc32c(slot number|durable end)(4)
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
// snapshot, SHA-256 of the magic and header record) followed by the bytes
// of the transaction's records. The two slots say up to which byte the
// file was durable: an append overwrites one of them in turn, in the same
// fsync, with the offset it appends at (the end of the last commit, made
// durable by the fsync before). Format 3 is the same without the slots.
const (
	storeMagic   = "LATCAT\x00\x04"
	storeVersion = 4
	// storeMagicV3 begins a format 3 store: no durable-end slots.
	storeMagicV3   = "LATCAT\x00\x03"
	storeVersionV3 = 3
	// slotBytes is one durable-end slot: the offset up to which the file
	// was durable, 8 bytes big endian, and a CRC-32C of the slot's number
	// and that offset. Format 4 keeps two after the magic; an append
	// overwrites them in turn.
	slotBytes = 8 + 4
	// preambleBytes is the magic and the two slots of format 4.
	preambleBytes  = 8 + 2*slotBytes
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
	errStoreTooLarge  = errors.New("catalog: the store would exceed the maximum store size")
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

// slotAt is the offset of durable-end slot i (0 or 1).
func slotAt(i int) int64 { return int64(len(storeMagic) + i*slotBytes) }

// encodeSlot is durable-end slot i saying the file is durable up to end.
func encodeSlot(i int, end int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(end))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(append([]byte{byte(i)}, b...), castagnoli))
}

// decodeSlot returns what slot i, its slotBytes bytes in b, says, and
// whether its CRC checks.
func decodeSlot(i int, b []byte) (int64, bool) {
	end := binary.BigEndian.Uint64(b)
	ok := crc32.Checksum(append([]byte{byte(i)}, b[:8]...), castagnoli) == binary.BigEndian.Uint32(b[8:])
	return int64(min(end, 1<<62)), ok
}

// headerBytes is the length of a store's magic, slots and header record.
func headerBytes(version uint64, capacity Capacity) int64 {
	n := int64(frameBytes + len(headerPayload(capacity)))
	if version == storeVersionV3 {
		return n + int64(len(storeMagicV3))
	}
	return n + preambleBytes
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
	w := &recordWriter{buf: make([]byte, preambleBytes)}
	copy(w.buf, storeMagic)
	w.record(recordHeader, headerPayload(capacity))
	chain := chainStart(storeMagic, w.buf[preambleBytes:])
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
	if len(w.buf) > maxStoreBytes {
		return nil, chain, errStoreTooLarge
	}
	// A snapshot is durable whole before anything reads it (it is
	// fsynced before it is renamed into place).
	for i := range 2 {
		copy(w.buf[slotAt(i):], encodeSlot(i, int64(len(w.buf))))
	}
	return w.buf, chain, nil
}

// chainStart is the chain digest before a store's first transaction:
// SHA-256 of its magic and its header record (not its slots).
func chainStart(magic string, header []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(magic))
	h.Write(header)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// encodeTransaction encodes changes as one transaction to append to a
// store whose last commit has the chain digest prev, and returns it with
// its own chain digest.
func encodeTransaction(changes []change, generation, issued uint64, prev [sha256.Size]byte) ([]byte, [sha256.Size]byte, error) {
	records, count, err := encodeChanges(changes)
	if err != nil {
		return nil, prev, err
	}
	tx, chain := sealTransaction(records, count, generation, issued, prev)
	return tx, chain, nil
}

// encodeChanges encodes the records of changes, count of them, without
// the commit that seals them into a transaction.
func encodeChanges(changes []change) (records []byte, count int, err error) {
	w := &recordWriter{}
	for i := range changes {
		if ch := &changes[i]; ch.dep != nil {
			w.deployment(ch.dep)
		} else {
			w.record(recordDelete, deletePayload(ch.key))
		}
	}
	if w.tooLarge {
		return nil, 0, errRecordTooLarge
	}
	return w.buf, w.records, nil
}

// sealTransaction returns records, count of them, followed by the commit
// at generation with issued that chains them to prev, and the new chain
// digest. The same records sealed after another commit make the same
// change in another file.
func sealTransaction(records []byte, count int, generation, issued uint64, prev [sha256.Size]byte) ([]byte, [sha256.Size]byte) {
	chain := chainNext(prev, records)
	w := &recordWriter{buf: slices.Clip(records)}
	w.record(recordCommit, commitPayload(generation, issued, count, chain))
	return w.buf, chain
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

// frame is one checksummed record of a store file: raw is all of its
// bytes, payload the part of them after the frame header; sum, the last
// 32 bytes of raw, is its checked SHA-256.
type frame struct {
	kind    byte
	payload []byte
	raw     []byte
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

// maxStoreBytes is the largest store file Open reads; a larger one is
// refused before any of it is read. A catalog never writes one: an append
// that would pass it rewrites the store instead, and a snapshot that would
// pass it fails.
const maxStoreBytes = 1 << 30

// logReader reads the records of a store file, front to back, through a
// window of readWindow bytes, and can go back to read a transaction again
// (seek). The bytes of the record it read last sit in one buffer it
// reuses, as large as the largest record so far: a frame it returns is
// only valid until the next read.
type logReader struct {
	r    io.ReaderAt
	at   int64 // offset of the next byte read returns
	size int64 // of the whole file
	// tornAt is where the torn tail that readFrame last reported begins:
	// the first of the zeros, or the end of the file.
	tornAt int64
	window []byte
	winAt  int64  // offset of window[0]
	win    []byte // the bytes of the file from winAt in window
	record []byte
}

// readWindow is how much of the file a logReader reads at once.
const readWindow = 64 << 10

func newLogReader(r io.ReaderAt, size int64) *logReader {
	return &logReader{r: r, size: size, window: make([]byte, readWindow)}
}

// seek makes at the offset of the next byte read returns.
func (lr *logReader) seek(at int64) { lr.at = at }

// read fills p from the file; the file holds at least that much.
func (lr *logReader) read(p []byte) error {
	for len(p) > 0 {
		if lr.at >= lr.winAt && lr.at < lr.winAt+int64(len(lr.win)) {
			n := copy(p, lr.win[lr.at-lr.winAt:])
			p, lr.at = p[n:], lr.at+int64(n)
			continue
		}
		if len(p) >= len(lr.window) {
			n, err := lr.r.ReadAt(p, lr.at)
			lr.at += int64(n)
			if n == len(p) {
				return nil
			}
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the file is shorter than its size
			}
			return err
		}
		want := int(min(int64(len(lr.window)), lr.size-lr.at))
		if want <= 0 {
			return io.ErrUnexpectedEOF
		}
		n, err := lr.r.ReadAt(lr.window[:want], lr.at)
		if n < want {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		lr.winAt, lr.win = lr.at, lr.window[:n]
	}
	return nil
}

// readFrame reads the next record, record number index of the file, into
// the reader's record buffer: the frame is valid until the next read. torn
// reports what an interrupted append leaves instead of a record: the file
// ends inside it, or it fails to check and the file ends in zero bytes
// that begin inside it (a file that grew before all of its data reached
// the disk; when they begin inside its checksum, the bytes of the
// checksum before them must be right). Anything else that fails to check
// is damage, a *formatError: a crash does not write bytes the writer never
// wrote. err is a failure to read. A record that fails to check ends the
// reading: only a run of zeros is read past it, and only as far as it
// goes.
func (lr *logReader) readFrame(index int) (f frame, torn bool, ferr *formatError, err error) {
	start := lr.at
	lr.tornAt = lr.size
	if lr.size-lr.at < frameHeaderBytes {
		return frame{}, true, nil, nil
	}
	var header [frameHeaderBytes]byte
	if err := lr.read(header[:]); err != nil {
		return frame{}, false, nil, err
	}
	if crc32.Checksum(header[:5], castagnoli) != binary.BigEndian.Uint32(header[5:]) {
		if torn, from, err := lr.zeroedFrom(header[:], nil); torn || err != nil {
			lr.tornAt = start + int64(from)
			return frame{}, torn, nil, err
		}
		return frame{}, false, formatFailure(index, ErrChecksumMismatch, "record header"), nil
	}
	length := binary.BigEndian.Uint32(header[1:])
	if length > maxRecordBytes {
		return frame{}, false, formatFailure(index, ErrMalformed, "record length over the limit"), nil
	}
	bodyEnd := frameHeaderBytes + int(length)
	if lr.size-lr.at < int64(bodyEnd-frameHeaderBytes+sha256.Size) {
		return frame{}, true, nil, nil
	}
	if cap(lr.record) < bodyEnd+sha256.Size {
		lr.record = make([]byte, bodyEnd+sha256.Size)
	}
	raw := lr.record[:bodyEnd+sha256.Size]
	copy(raw, header[:])
	if err := lr.read(raw[frameHeaderBytes:]); err != nil {
		return frame{}, false, nil, err
	}
	h := sha256.New()
	h.Write(raw[:5])
	h.Write(raw[frameHeaderBytes:bodyEnd])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if !bytes.Equal(sum[:], raw[bodyEnd:]) {
		if torn, from, err := lr.zeroedFrom(raw, sum[:]); torn || err != nil {
			lr.tornAt = start + int64(from)
			return frame{}, torn, nil, err
		}
		return frame{}, false, formatFailure(index, ErrChecksumMismatch, ""), nil
	}
	return frame{kind: raw[0], payload: raw[frameHeaderBytes:bodyEnd], raw: raw}, false, nil, nil
}

// zeroedFrom reports whether the file ends in a run of zero bytes that
// begins inside record, the bytes just read of a record that failed to
// check. When sum, the record's true checksum, is given and the run
// begins inside the record's checksum, the bytes before it must match sum:
// then only bytes the writer had not yet written are missing. A single
// damaged byte elsewhere cannot make such a run: a committed store ends
// in a SHA-256, and every record in one. It reads the rest of the file
// only while it holds zeros.
func (lr *logReader) zeroedFrom(record, sum []byte) (torn bool, from int, err error) {
	zeros := len(record)
	for zeros > 0 && record[zeros-1] == 0 {
		zeros--
	}
	if zeros == len(record) {
		return false, 0, nil
	}
	if sumAt := len(record) - sha256.Size; sum != nil && zeros > sumAt && !bytes.Equal(record[sumAt:zeros], sum[:zeros-sumAt]) {
		return false, 0, nil
	}
	buf := make([]byte, 32<<10)
	for lr.at < lr.size {
		n := int(min(int64(len(buf)), lr.size-lr.at))
		if err := lr.read(buf[:n]); err != nil {
			return false, 0, err
		}
		for _, c := range buf[:n] {
			if c != 0 {
				return false, 0, nil
			}
		}
	}
	return true, zeros, nil
}
