// Package strhash is a seeded 64-bit hash for the short strings that
// admission looks up on every request (tenant, subject, service names):
// a multiply-fold over eight bytes at a time in the manner of wyhash.
// For strings of a few dozen bytes it costs a fraction of hash/maphash
// (which pays for a call into the runtime per string) and it hashes a
// pair of strings in one pass.
//
// It is not a cryptographic hash. The tables keyed by it are built from
// operator configuration, never from requests, and are seeded at random
// per process, so a request can probe them but not fill a chain.
package strhash

import (
	"encoding/binary"
	"math/bits"
)

const (
	k0 = 0xa0761d6478bd642f
	k1 = 0xe7037ed1a0b428db
	k2 = 0x8ebc6af09c88c6e3
	k3 = 0x589965cc75374cc3
)

// mix multiplies a by b in 128 bits and folds the halves.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// short reads a string of at most eight bytes into a word. Two reads that
// may overlap (or three bytes for the shortest) cover it; the length,
// which the callers fold in, tells the overlaps apart.
func short(s string) uint64 {
	switch n := len(s); {
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32([]byte(s[:4]))) | uint64(binary.LittleEndian.Uint32([]byte(s[n-4:])))<<32
	case n > 0:
		return uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return 0
}

// String hashes s under seed. Its length is part of the hash, so strings
// that share a prefix and differ in length differ.
func String(seed uint64, s string) uint64 {
	n := uint64(len(s))
	for len(s) > 16 {
		seed = mix(le64(s[:8])^k2, le64(s[8:16])^seed)
		s = s[16:]
	}
	var a, b uint64
	if len(s) <= 8 {
		a = short(s)
	} else {
		a, b = le64(s[:8]), le64(s[len(s)-8:])
	}
	return mix(k1^n, mix(a^k1, b^seed^k0))
}

func le64(s string) uint64 { return binary.LittleEndian.Uint64([]byte(s)) }

// Pair hashes the pair (a, b) under seed; both lengths are part of the
// hash, so ("ab", "c") and ("a", "bc") differ. Two names of at most eight
// bytes each, the common case, cost two multiplications.
func Pair(seed uint64, a, b string) uint64 {
	if len(a) <= 8 && len(b) <= 8 {
		return PairWords(seed, Short(a), Short(b), len(a), len(b))
	}
	return String(String(seed, a), b)
}

// Short is the word that Pair reads a string of at most eight
// bytes as: with the length, it determines the string. Of a longer
// string it is some word that a caller must not compare.
func Short(s string) uint64 { return short(s) }

// PairWords is Pair of two strings of at most eight bytes, given as their
// Short words and lengths, for a caller that compares the words too.
func PairWords(seed, a, b uint64, lenA, lenB int) uint64 {
	return mix(k3^uint64(lenA)<<32^uint64(lenB), mix(a^k1, b^seed^k2))
}
