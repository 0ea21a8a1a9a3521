package catalog

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// The index is a persistent hash array mapped trie from (tenant, service)
// to a compiled deployment (see doc.go, "Pins and structure sharing").
// Each node branches 32 ways on 5 bits of the key's hash and stores only
// its occupied slots, found by counting the bits below the slot's in the
// node's bitmap. A slot holds either one deployment (a leaf, with its
// full hash) or a child node. Two keys whose full 64-bit hashes are equal
// end up in an overflow node below the last level, searched linearly.
//
// A change copies the nodes on the path from the root to the key, so it
// costs O(log32 n) node copies and leaves every node a pin can reach
// untouched. A batch of changes (one Apply, or rebuilding a catalog from
// its store) passes one edit token: a node created under that token is
// changed in place by the rest of the batch, since no pin can reach it
// until the batch is published, and never again afterwards, since no
// later batch carries the same token.
type index struct {
	root  *indexNode // never nil
	count int
}

type indexNode struct {
	bitmap uint32
	slots  []indexSlot
	// overflow holds the leaves of keys whose full hashes are equal; only
	// a node below the last level of bits has it, and such a node has no
	// slots.
	overflow []indexSlot
	// edit is the token of the batch that created the node; only that
	// batch changes it in place.
	edit uint64
}

type indexSlot struct {
	hash  uint64
	dep   *deployment // a leaf when child is nil
	child *indexNode
}

const (
	indexBits = 5
	indexMask = 1<<indexBits - 1
)

// indexKey keys the trie's hash. It is chosen per process: the index
// lives only in memory, and a key that nobody outside the process knows
// keeps anyone who chooses names from aiming them at one path of the
// trie.
var indexKey = [2]uint64{rand.Uint64(), rand.Uint64()}

// keyHash is the hash the index places (tenant, service) by: each name
// hashed with xxhash, each hash XORed with one half of the key, and the
// two folded by one 128-bit multiplication. Each name is hashed whole, so
// ("ab", "c") and ("a", "bc") do not meet by construction, and the halves
// of the key differ, so neither do (a, b) and (b, a). Hashing each name
// in place needs no buffer to copy the key and both names into.
// BenchmarkCycle and BenchmarkReject (bench/bench_test.go) measured this
// hash against the one before xxhash, two binaries run alternately:
// the same within the noise (bench/results/bench-2026-12-01-xxhash.txt).
func keyHash(tenant, service string) uint64 {
	hi, lo := bits.Mul64(xxhash.Sum64String(tenant)^indexKey[0], xxhash.Sum64String(service)^indexKey[1])
	return hi ^ lo
}

// editTokens hands out edit tokens; 0 is never one.
var editTokens atomic.Uint64

func newEditToken() uint64 { return editTokens.Add(1) }

func emptyIndex() index { return index{root: &indexNode{}} }

// get returns the deployment of (tenant, service), whose hash is h, or nil.
func (x *index) get(h uint64, tenant, service string) *deployment {
	n := x.root
	for shift := uint(0); shift < 64; shift += indexBits {
		bit := uint32(1) << ((h >> shift) & indexMask)
		if n.bitmap&bit == 0 {
			return nil
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.child == nil {
			if s.hash == h && s.dep.tenant == tenant && s.dep.service == service {
				return s.dep
			}
			return nil
		}
		n = s.child
	}
	for i := range n.overflow {
		if d := n.overflow[i].dep; d.tenant == tenant && d.service == service {
			return d
		}
	}
	return nil
}

// put returns the index with dep as the deployment of its key, and the
// deployment it replaced, if any. edit is the batch's token.
func (x index) put(h uint64, dep *deployment, edit uint64) (index, *deployment) {
	root, old := x.root.put(0, h, dep, edit)
	x.root = root
	if old == nil {
		x.count++
	}
	return x, old
}

// remove returns the index without the key of (tenant, service), and the
// deployment it held, or x itself and nil when it holds none.
func (x index) remove(h uint64, tenant, service string, edit uint64) (index, *deployment) {
	root, old := x.root.remove(0, h, tenant, service, edit)
	if old == nil {
		return x, nil
	}
	if root == nil {
		root = &indexNode{edit: edit}
	}
	return index{root: root, count: x.count - 1}, old
}

// each calls f for every deployment, in no particular order.
func (x *index) each(f func(*deployment)) { x.root.each(f) }

func (n *indexNode) each(f func(*deployment)) {
	for i := range n.slots {
		if s := &n.slots[i]; s.child != nil {
			s.child.each(f)
		} else {
			f(s.dep)
		}
	}
	for i := range n.overflow {
		f(n.overflow[i].dep)
	}
}

// editable returns n itself if the batch edit created it, else a copy
// that belongs to edit, with room for one more slot.
func (n *indexNode) editable(edit uint64) *indexNode {
	if edit == 0 {
		panic("catalog: index changed without an edit token")
	}
	if n.edit == edit {
		return n
	}
	m := &indexNode{bitmap: n.bitmap, edit: edit}
	if len(n.slots) > 0 {
		m.slots = make([]indexSlot, len(n.slots), len(n.slots)+1)
		copy(m.slots, n.slots)
	}
	if len(n.overflow) > 0 {
		m.overflow = make([]indexSlot, len(n.overflow), len(n.overflow)+1)
		copy(m.overflow, n.overflow)
	}
	return m
}

func sameKey(d *deployment, tenant, service string) bool {
	return d.tenant == tenant && d.service == service
}

func (n *indexNode) put(shift uint, h uint64, dep *deployment, edit uint64) (*indexNode, *deployment) {
	if shift >= 64 {
		m := n.editable(edit)
		for i := range m.overflow {
			if old := m.overflow[i].dep; sameKey(old, dep.tenant, dep.service) {
				m.overflow[i].dep = dep
				return m, old
			}
		}
		m.overflow = append(m.overflow, indexSlot{hash: h, dep: dep})
		return m, nil
	}
	bit := uint32(1) << ((h >> shift) & indexMask)
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		m := n.editable(edit)
		m.slots = slices.Insert(m.slots, pos, indexSlot{hash: h, dep: dep})
		m.bitmap |= bit
		return m, nil
	}
	s := n.slots[pos]
	if s.child != nil {
		child, old := s.child.put(shift+indexBits, h, dep, edit)
		m := n.editable(edit)
		m.slots[pos].child = child
		return m, old
	}
	if s.hash == h && sameKey(s.dep, dep.tenant, dep.service) {
		m := n.editable(edit)
		m.slots[pos].dep = dep
		return m, s.dep
	}
	// Two keys share this slot: push both one level down.
	child, _ := (&indexNode{edit: edit}).put(shift+indexBits, s.hash, s.dep, edit)
	child, _ = child.put(shift+indexBits, h, dep, edit)
	m := n.editable(edit)
	m.slots[pos] = indexSlot{child: child}
	return m, nil
}

// remove returns n without the key, nil if nothing is left in it, and the
// deployment removed; when the key is absent it returns n and nil. A node
// left holding a single leaf is folded into its parent, so a lookup never
// walks through a chain of one-entry nodes.
func (n *indexNode) remove(shift uint, h uint64, tenant, service string, edit uint64) (*indexNode, *deployment) {
	if shift >= 64 {
		for i := range n.overflow {
			if old := n.overflow[i].dep; sameKey(old, tenant, service) {
				if len(n.overflow) == 1 {
					return nil, old
				}
				m := n.editable(edit)
				m.overflow = slices.Delete(m.overflow, i, i+1)
				return m, old
			}
		}
		return n, nil
	}
	bit := uint32(1) << ((h >> shift) & indexMask)
	if n.bitmap&bit == 0 {
		return n, nil
	}
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[pos]
	var replacement indexSlot
	var old *deployment
	if s.child == nil {
		if s.hash != h || !sameKey(s.dep, tenant, service) {
			return n, nil
		}
		old = s.dep
	} else {
		var child *indexNode
		child, old = s.child.remove(shift+indexBits, h, tenant, service, edit)
		if old == nil {
			return n, nil
		}
		switch {
		case child == nil:
		case child.singleLeaf():
			replacement = child.onlyLeaf()
		default:
			replacement = indexSlot{child: child}
		}
	}
	if replacement.dep == nil && replacement.child == nil {
		if len(n.slots) == 1 {
			return nil, old
		}
		m := n.editable(edit)
		m.slots = slices.Delete(m.slots, pos, pos+1)
		m.bitmap &^= bit
		return m, old
	}
	m := n.editable(edit)
	m.slots[pos] = replacement
	return m, old
}

func (n *indexNode) singleLeaf() bool {
	return len(n.slots)+len(n.overflow) == 1 && (len(n.overflow) == 1 || n.slots[0].child == nil)
}

func (n *indexNode) onlyLeaf() indexSlot {
	if len(n.overflow) == 1 {
		return n.overflow[0]
	}
	return n.slots[0]
}
