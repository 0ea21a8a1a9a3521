package catalog

import (
	"encoding/binary"
	"errors"
	"time"

	"latent.dev/admission/policy"
)

// The policy record of one revision is its canonical binary encoding: the
// release metadata, the weight and the typed policy, in a fixed field order,
// lengths and numbers as unsigned varints, set-like lists sorted (the
// catalog normalizes them at deploy). It is what the store persists per
// revision and what capacity charges, so its length is deterministic.

// RecordSize is the number of policy bytes a revision is charged: the
// length of its canonical record once normalized as a deployment would.
func RecordSize(r Revision) uint64 {
	n := normalizeRevision(r)
	return uint64(len(appendRevisionRecord(nil, &n)))
}

func appendRevisionRecord(b []byte, r *Revision) []byte {
	b = appendString(b, r.Release.ArtifactDigest)
	b = appendString(b, r.Release.Version)
	b = binary.AppendUvarint(b, r.Weight)
	return appendPolicy(b, &r.Policy)
}

// appendPolicy is also the canonical policy encoding that revision
// identities hash; the weight is not part of it, so shifting traffic keeps
// a revision's identity.
func appendPolicy(b []byte, p *policy.RevisionPolicy) []byte {
	b = appendString(b, p.TrustClass)
	b = appendString(b, p.Backend)
	b = append(b, byte(p.Threading))
	b = appendString(b, p.StateModel)
	b = appendStrings(b, p.Features)
	b = binary.AppendUvarint(b, uint64(p.CallDepthLimit))
	b = appendCeiling(b, p.CapsuleCeiling)
	b = appendCeiling(b, p.DeploymentCeiling)
	b = appendStrings(b, p.Placement.Architectures)
	b = appendStrings(b, p.Placement.Regions)
	return appendStrings(b, p.Placement.Zones)
}

const (
	ceilingCPU byte = 1 << iota
	ceilingMemory
	ceilingWall
	ceilingAll = ceilingCPU | ceilingMemory | ceilingWall
)

func appendCeiling(b []byte, c policy.Ceiling) []byte {
	var flags byte
	if c.CPUFuel.Set {
		flags |= ceilingCPU
	}
	if c.MemoryBytes.Set {
		flags |= ceilingMemory
	}
	if c.WallTime.Set {
		flags |= ceilingWall
	}
	b = append(b, flags)
	if c.CPUFuel.Set {
		b = binary.AppendUvarint(b, c.CPUFuel.Value)
	}
	if c.MemoryBytes.Set {
		b = binary.AppendUvarint(b, c.MemoryBytes.Value)
	}
	if c.WallTime.Set {
		b = binary.AppendUvarint(b, uint64(c.WallTime.Value))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, list []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(list)))
	for _, s := range list {
		b = appendString(b, s)
	}
	return b
}

var errRecord = errors.New("record content is not well formed")

// reader decodes records written by the append functions. Errors are
// sticky: after the first, every read returns a zero value, so decoding
// code reads straight through and checks err once. Lengths and counts are
// bounded by the bytes left, so hostile input cannot make it allocate more
// than the input's size.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() { r.err = errRecord }

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// strings returns nil for an empty list, as normalization does.
func (r *reader) strings() []string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		out = append(out, r.string())
	}
	return out
}

func (r *reader) ceiling() policy.Ceiling {
	var c policy.Ceiling
	flags := r.byte()
	if flags&^ceilingAll != 0 {
		r.fail()
		return c
	}
	if flags&ceilingCPU != 0 {
		c.CPUFuel = policy.Some(r.uvarint())
	}
	if flags&ceilingMemory != 0 {
		c.MemoryBytes = policy.Some(r.uvarint())
	}
	if flags&ceilingWall != 0 {
		wall := r.uvarint()
		if wall > 1<<63-1 {
			r.fail()
		}
		c.WallTime = policy.Some(time.Duration(wall))
	}
	return c
}

// end fails unless every byte was consumed.
func (r *reader) end() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	return r.err
}

func readRevisionRecord(b []byte) (Revision, error) {
	r := &reader{b: b}
	var rev Revision
	rev.Release.ArtifactDigest = r.string()
	rev.Release.Version = r.string()
	rev.Weight = r.uvarint()
	p := &rev.Policy
	p.TrustClass = r.string()
	p.Backend = r.string()
	p.Threading = policy.Threading(r.byte())
	p.StateModel = r.string()
	p.Features = r.strings()
	depth := r.uvarint()
	if depth > 1<<32-1 {
		r.fail()
	}
	p.CallDepthLimit = uint32(depth)
	p.CapsuleCeiling = r.ceiling()
	p.DeploymentCeiling = r.ceiling()
	p.Placement.Architectures = r.strings()
	p.Placement.Regions = r.strings()
	p.Placement.Zones = r.strings()
	return rev, r.end()
}
