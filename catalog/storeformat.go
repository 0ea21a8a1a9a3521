package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
)

// Store file layout (see doc.go, "Store format"):
//
//	file   = magic record... end
//	record = kind(1) length(4, big endian) payload(length) sha256(kind|length|payload)(32)
//
// Records come in a fixed order: one header, then per deployment (oldest
// generation first) one deployment record followed by, per route, one
// route record and its revision records; then the end record, whose
// payload is the number of records before it and the SHA-256 of every
// byte before it. Nothing may follow the end record.
const (
	storeMagic   = "LATCAT\x00\x01"
	storeVersion = 2
	// storeVersion1 headers lack the issued high-water mark; Open still
	// reads them, taking the catalog generation as the mark.
	storeVersion1  = 1
	recordHeader   = 'H'
	recordDeploy   = 'D'
	recordRoute    = 'R'
	recordRevision = 'V'
	recordEnd      = 'E'
	frameBytes     = 1 + 4 + sha256.Size
	// maxRecordBytes bounds one record so a damaged length field cannot
	// make the reader trust a huge span.
	maxRecordBytes = 1 << 24
)

var errRecordTooLarge = errors.New("catalog: a store record would exceed the record size limit")

// encodeStore encodes a whole catalog view and issued, the highest
// generation the catalog has handed out (at least the view's own).
func encodeStore(capacity Capacity, pin *Pin, issued uint64) ([]byte, error) {
	issued = max(issued, pin.generation)
	deps := make([]*deployment, 0, len(pin.deployments))
	for _, d := range pin.deployments {
		deps = append(deps, d)
	}
	slices.SortFunc(deps, func(a, b *deployment) int {
		return compareUint64(a.generation, b.generation)
	})
	w := &storeWriter{buf: []byte(storeMagic)}
	var header []byte
	header = binary.AppendUvarint(header, storeVersion)
	header = binary.AppendUvarint(header, pin.generation)
	header = binary.AppendUvarint(header, issued)
	header = binary.AppendUvarint(header, capacity.MaxRevisions)
	header = binary.AppendUvarint(header, capacity.MaxPolicyBytes)
	header = binary.AppendUvarint(header, uint64(len(deps)))
	w.record(recordHeader, header)
	for _, dep := range deps {
		var b []byte
		b = appendString(b, dep.tenant)
		b = appendString(b, dep.service)
		b = binary.AppendUvarint(b, dep.generation)
		b = binary.AppendUvarint(b, uint64(len(dep.routes)))
		w.record(recordDeploy, b)
		for i := range dep.routes {
			rt := &dep.routes[i]
			b = appendString(b[:0], rt.name)
			b = appendString(b, rt.contract)
			b = appendString(b, rt.function)
			b = binary.AppendUvarint(b, uint64(len(rt.revisions)))
			w.record(recordRoute, b)
			for j := range rt.revisions {
				w.record(recordRevision, appendRevisionRecord(b[:0], &rt.revisions[j].spec))
			}
		}
	}
	digest := sha256.Sum256(w.buf)
	end := binary.AppendUvarint(nil, uint64(w.records))
	w.record(recordEnd, append(end, digest[:]...))
	if w.tooLarge {
		return nil, errRecordTooLarge
	}
	return w.buf, nil
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

type storeWriter struct {
	buf      []byte
	records  int
	tooLarge bool
}

func (w *storeWriter) record(kind byte, payload []byte) {
	if len(payload) > maxRecordBytes {
		w.tooLarge = true
		return
	}
	start := len(w.buf)
	w.buf = append(w.buf, kind)
	w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(payload)))
	w.buf = append(w.buf, payload...)
	sum := sha256.Sum256(w.buf[start:])
	w.buf = append(w.buf, sum[:]...)
	w.records++
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

// readFrames checks the framing and every checksum and returns the records
// before the end record. Checksums are checked before any content is
// interpreted, so a torn or damaged file is reported as such, not as
// whatever its damaged content happens to look like.
func readFrames(data []byte) ([]frame, *formatError) {
	if len(data) < len(storeMagic) {
		if bytes.HasPrefix([]byte(storeMagic), data) {
			return nil, formatFailure(-1, ErrTruncated, "shorter than the file header")
		}
		return nil, formatFailure(-1, ErrMalformed, "not a catalog store")
	}
	if string(data[:len(storeMagic)]) != storeMagic {
		return nil, formatFailure(-1, ErrMalformed, "not a catalog store")
	}
	var frames []frame
	at := len(storeMagic)
	for index := 0; ; index++ {
		if len(data)-at < frameBytes {
			return nil, formatFailure(index, ErrTruncated, "ends before the end record")
		}
		kind := data[at]
		length := binary.BigEndian.Uint32(data[at+1:])
		if length > maxRecordBytes {
			return nil, formatFailure(index, ErrMalformed, "record length over the limit")
		}
		if uint64(len(data)-at) < uint64(frameBytes)+uint64(length) {
			return nil, formatFailure(index, ErrTruncated, "ends inside a record")
		}
		bodyEnd := at + 5 + int(length)
		sum := sha256.Sum256(data[at:bodyEnd])
		if !bytes.Equal(sum[:], data[bodyEnd:bodyEnd+sha256.Size]) {
			return nil, formatFailure(index, ErrChecksumMismatch, "")
		}
		payload := data[at+5 : bodyEnd]
		if kind == recordEnd {
			if err := checkEnd(data[:at], payload, index); err != nil {
				return nil, err
			}
			if bodyEnd+sha256.Size != len(data) {
				return nil, formatFailure(index, ErrMalformed, "data after the end record")
			}
			return frames, nil
		}
		frames = append(frames, frame{kind: kind, payload: payload})
		at = bodyEnd + sha256.Size
	}
}

func checkEnd(before, payload []byte, index int) *formatError {
	r := &reader{b: payload}
	count := r.uvarint()
	if r.err != nil || len(r.b) != sha256.Size {
		return formatFailure(index, ErrMalformed, "bad end record")
	}
	if count != uint64(index) {
		return formatFailure(index, ErrMalformed, "record count mismatch")
	}
	digest := sha256.Sum256(before)
	if !bytes.Equal(digest[:], r.b) {
		return formatFailure(index, ErrChecksumMismatch, "file digest")
	}
	return nil
}
