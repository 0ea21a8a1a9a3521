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

// String hashes s under seed. Its length is part of the hash, so strings
// that share a prefix and differ in length differ.
func String(seed uint64, s string) uint64 {
	h := mix(seed^k0, uint64(len(s))^k1)
	for len(s) > 16 {
		h = mix(binary.LittleEndian.Uint64([]byte(s[:8]))^k2^h, binary.LittleEndian.Uint64([]byte(s[8:16]))^k3)
		s = s[16:]
	}
	var a, b uint64
	switch n := len(s); {
	case n > 8:
		a = binary.LittleEndian.Uint64([]byte(s[:8]))
		b = binary.LittleEndian.Uint64([]byte(s[n-8:]))
	case n >= 4:
		a = uint64(binary.LittleEndian.Uint32([]byte(s[:4])))
		b = uint64(binary.LittleEndian.Uint32([]byte(s[n-4:])))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return mix(a^k2^h, b^k3^seed)
}

// Pair hashes the pair (a, b) under seed: b is hashed under a's hash, so
// ("ab", "c") and ("a", "bc") differ by their lengths.
func Pair(seed uint64, a, b string) uint64 { return String(String(seed, a), b) }
