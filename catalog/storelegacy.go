package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
)

// Stores written before format version 3 (see doc.go, "Migration") are one
// snapshot each:
//
//	file   = magic "LATCAT\x00\x01" record... end
//	record = kind(1) length(4, big endian) payload(length) sha256(kind|length|payload)(32)
//
// The records are one header (version, catalog generation, in version 2
// the highest generation handed out, capacity, number of deployments),
// then per deployment, oldest generation first, its deployment, route and
// revision records, whose payloads are the ones format 3 writes; then the
// end record, whose payload is the number of records before it and the
// SHA-256 of every byte before it. Open reads such a store and rewrites it
// in the current format before it returns.
const (
	legacyMagic      = "LATCAT\x00\x01"
	legacyVersion1   = 1 // the header lacks the highest generation handed out
	legacyVersion2   = 2
	legacyEnd        = 'E'
	legacyFrameBytes = 1 + 4 + sha256.Size
)

// readLegacyFrames checks the framing and every checksum of a legacy store
// and returns the records before the end record.
func readLegacyFrames(data []byte) ([]frame, *formatError) {
	var frames []frame
	at := len(legacyMagic)
	for index := 0; ; index++ {
		if len(data)-at < legacyFrameBytes {
			return nil, formatFailure(index, ErrTruncated, "ends before the end record")
		}
		kind := data[at]
		length := binary.BigEndian.Uint32(data[at+1:])
		if length > maxRecordBytes {
			return nil, formatFailure(index, ErrMalformed, "record length over the limit")
		}
		if uint64(len(data)-at) < uint64(legacyFrameBytes)+uint64(length) {
			return nil, formatFailure(index, ErrTruncated, "ends inside a record")
		}
		bodyEnd := at + 5 + int(length)
		sum := sha256.Sum256(data[at:bodyEnd])
		if !bytes.Equal(sum[:], data[bodyEnd:bodyEnd+sha256.Size]) {
			return nil, formatFailure(index, ErrChecksumMismatch, "")
		}
		payload := data[at+5 : bodyEnd]
		if kind == legacyEnd {
			if err := checkLegacyEnd(data[:at], payload, index); err != nil {
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

func checkLegacyEnd(before, payload []byte, index int) *formatError {
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

// decodeLegacyStore rebuilds the view, the capacity and the highest
// generation handed out from a version 1 or 2 store. Every deployment goes
// through the same compilation and checks as one read from a current
// store.
func decodeLegacyStore(data []byte) (*decodedStore, *formatError) {
	frames, ferr := readLegacyFrames(data)
	if ferr != nil {
		return nil, ferr
	}
	if len(frames) == 0 || frames[0].kind != recordHeader {
		return nil, formatFailure(0, ErrMalformed, "expected the header record")
	}
	hr := &reader{b: frames[0].payload}
	version := hr.uvarint()
	if version != legacyVersion1 && version != legacyVersion2 {
		return nil, formatFailure(0, ErrMalformed, "unsupported format version")
	}
	generation := hr.uvarint()
	issued := generation
	if version == legacyVersion2 {
		issued = hr.uvarint()
	}
	capacity := Capacity{MaxRevisions: hr.uvarint(), MaxPolicyBytes: hr.uvarint()}
	count := hr.uvarint()
	if hr.end() != nil {
		return nil, formatFailure(0, ErrMalformed, "bad header record")
	}
	if issued < generation {
		return nil, formatFailure(0, ErrMalformed, "issued generation below the catalog's")
	}
	b := newViewBuilder(capacity)
	sr := &storeReader{frames: frames, next: 1}
	for d := uint64(0); d < count; d++ {
		at := sr.next
		dep, ferr := sr.deployment()
		if ferr != nil {
			return nil, ferr
		}
		if ferr := b.snapshotDeployment(dep, generation, at); ferr != nil {
			return nil, ferr
		}
	}
	if sr.next != len(frames) {
		return nil, formatFailure(sr.next, ErrMalformed, "unexpected record")
	}
	if ferr := b.commit(generation, issued, -1); ferr != nil {
		return nil, ferr
	}
	return &decodedStore{capacity: capacity, pin: b.pin(), issued: issued, version: version}, nil
}
