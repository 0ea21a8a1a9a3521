package core

import (
	"slices"
	"sync/atomic"
	"unsafe"

	"latent.dev/admission/policy"
)

// What steps 6 and 7 derive from a revision's policy alone: step 6's
// answer (backend, state model, threading, features, placement against
// what the node offers) with the revision's features as a bitset, and the
// ID of its trust class for step 7, whose allowlist check depends on the
// tenant and is made every time. A revision policy never changes, and
// neither does the node's, so the provider keeps the derivation per
// policy in a small cache instead of comparing a dozen names on every
// request.
type requirements struct {
	err        *rejection // step 6's answer; nil when it passes
	features   policy.FeatureSet
	trust      policy.TrustClassID
	trustKnown bool
	// cells are the configured cell classes that support the revision's
	// threading model and offer all its features: step 9 then needs only
	// the memory comparison.
	cells policy.CellClassSet
}

// deriveRequirements computes them.
func (pr *LocalQuotaProvider) deriveRequirements(rev *policy.RevisionPolicy) requirements {
	var v requirements
	v.trust, v.trustKnown = pr.policy.TrustClassID(rev.TrustClass)
	switch {
	case !pr.policy.SupportsBackend(rev.Backend):
		v.err = errBackend
		return v
	case !pr.policy.SupportsStateModel(rev.StateModel):
		v.err = errStateModel
		return v
	case !pr.threading.Has(rev.Threading):
		v.err = errThreading
		return v
	}
	for _, f := range rev.Features {
		bit, ok := pr.policy.Feature(f)
		if !ok {
			v.err = errFeatures
			return v
		}
		v.features |= bit
	}
	for i := range pr.cells {
		if cl := &pr.cells[i]; cl.Configured && cl.Threading.Has(rev.Threading) && v.features&^cl.Features == 0 {
			v.cells = v.cells.With(policy.CellClass(i))
		}
	}
	place := &pr.node.Placement
	pl := &rev.Placement
	switch {
	case len(pl.Architectures) > 0 && !slices.Contains(pl.Architectures, place.Architecture):
		v.err = errArchitecture
	case len(pl.Regions) > 0 && !slices.Contains(pl.Regions, place.Region):
		v.err = errRegion
	case len(pl.Zones) > 0 && !slices.Contains(pl.Zones, place.Zone):
		v.err = errZone
	}
	return v
}

// requirementsCache is direct-mapped by the policy's address. Each slot
// is a sequence lock over atomic words: a reader that sees the sequence
// odd or changed, or another policy in the slot, misses and derives; a
// writer that cannot take the slot at once skips the fill. Everything is
// atomic, so a reader never sees one policy's key with another's value.
// A slot keeps its policy reachable, so its address cannot be reused by
// another while cached; at most requirementsSlots old policies are kept
// so. The memory is allocated with the provider.
type requirementsCache struct {
	slots [requirementsSlots]requirementsSlot
}

const requirementsSlots = 256

type requirementsSlot struct {
	seq      atomic.Uint64
	rev      atomic.Pointer[policy.RevisionPolicy]
	features atomic.Uint64
	meta     atomic.Uint32 // as packedRequirements.meta
}

func (c *requirementsCache) slot(rev *policy.RevisionPolicy) *requirementsSlot {
	return &c.slots[uintptr(unsafe.Pointer(rev))>>6%requirementsSlots]
}

// packedRequirements is requirements as a slot holds them: the features,
// and meta = trust class ID | known<<8 | (step 6's error index + 1)<<16 |
// cells<<24. It is handed back packed and read through its methods:
// returning a struct of small fields just written would make the caller
// reload them through the store buffer, which costs more than the lookup.
type packedRequirements struct {
	features policy.FeatureSet
	meta     uint32
}

func (v requirements) pack() packedRequirements {
	meta := uint32(v.trust) | uint32(v.cells)<<24
	if v.trustKnown {
		meta |= 1 << 8
	}
	if v.err != nil {
		meta |= (uint32(v.err.index) + 1) << 16
	}
	return packedRequirements{v.features, meta}
}

func (w packedRequirements) err() *rejection {
	if i := w.meta >> 16 & 0xff; i != 0 {
		return allErrors[i-1]
	}
	return nil
}

func (w packedRequirements) trust() (policy.TrustClassID, bool) {
	return policy.TrustClassID(w.meta & 0xff), w.meta&(1<<8) != 0
}

func (w packedRequirements) cells() policy.CellClassSet { return policy.CellClassSet(w.meta >> 24) }

// load returns the slot's value if it holds rev's.
func (s *requirementsSlot) load(rev *policy.RevisionPolicy) (packedRequirements, bool) {
	q := s.seq.Load()
	if q&1 != 0 || s.rev.Load() != rev {
		return packedRequirements{}, false
	}
	w := packedRequirements{policy.FeatureSet(s.features.Load()), s.meta.Load()}
	if s.seq.Load() != q {
		return packedRequirements{}, false
	}
	return w, true
}

func (s *requirementsSlot) store(rev *policy.RevisionPolicy, w packedRequirements) {
	q := s.seq.Load()
	if q&1 != 0 || !s.seq.CompareAndSwap(q, q+1) {
		return
	}
	s.rev.Store(rev)
	s.features.Store(uint64(w.features))
	s.meta.Store(w.meta)
	s.seq.Store(q + 2)
}

// requirementsOf is deriveRequirements through the cache.
func (pr *LocalQuotaProvider) requirementsOf(rev *policy.RevisionPolicy) packedRequirements {
	s := pr.requirements.slot(rev)
	if w, ok := s.load(rev); ok {
		return w
	}
	w := pr.deriveRequirements(rev).pack()
	s.store(rev, w)
	return w
}
