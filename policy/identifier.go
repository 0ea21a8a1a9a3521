package policy

import (
	"unicode"
	"unicode/utf8"
)

// MinimumGeneratedIdentifierBytes is the smallest allowance a node may give
// generated identities (revision and release IDs are at most 83 bytes).
const MinimumGeneratedIdentifierBytes = 83

// ValidIdentifier reports whether s obeys the identifier rules: not empty,
// at most maxBytes bytes, valid UTF-8, and free of white space, control
// and format characters in Unicode's sense (unicode.IsSpace,
// unicode.IsControl, unicode.Cf). Format characters (bidirectional
// overrides and isolates, zero-width characters, the byte-order mark) are
// refused so that no identifier can be made to look like another in a log
// or an error report.
func ValidIdentifier(s string, maxBytes uint32) bool {
	n := len(s)
	if n == 0 || uint64(n) > uint64(maxBytes) {
		return false
	}
	// Nearly every identifier is printable ASCII other than space and DEL;
	// that is checked eight bytes at a time, without a branch per word,
	// and only an identifier with a suspicious byte goes byte by byte.
	if n < 8 {
		if n >= 4 {
			// Two overlapping four-byte halves make one word.
			return suspicious(uint64(word4(s[:4]))|uint64(word4(s[n-4:]))<<32) == 0 || validSlow(s)
		}
		var bad uint8
		for i := 0; i < n; i++ {
			bad |= notPlain[s[i]]
		}
		return bad == 0 || validSlow(s)
	}
	var bad uint64
	for i := 0; i+8 <= n; i += 8 {
		bad |= suspicious(word(s[i : i+8]))
	}
	// The last, overlapping, word covers the tail.
	bad |= suspicious(word(s[n-8:]))
	return bad == 0 || validSlow(s)
}

// notPlain marks the bytes that are not printable ASCII other than space
// and DEL: control bytes, space, DEL, and every byte of a multi-byte rune.
var notPlain = func() (t [256]uint8) {
	for b := range t {
		if b <= ' ' || b >= 0x7f {
			t[b] = 1
		}
	}
	return t
}()

// word reads eight bytes as a little-endian word (one load once compiled).
func word(b string) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// word4 reads four bytes as a little-endian word.
func word4(b string) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// validSlow checks byte by byte, decoding runes once past ASCII.
func validSlow(s string) bool {
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b <= ' ' || b == 0x7f {
			return false
		}
		if b >= utf8.RuneSelf {
			return validRunes(s[i:])
		}
	}
	return true
}

const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// suspicious is zero exactly when all eight bytes of w lie in 0x21..0x7e.
// Otherwise it has a high bit set for some byte that is not ASCII, is
// below 0x21 or is 0x7f (the classic SWAR "has a byte less than n" and
// "has a zero byte" tests); its positions may be off once a high bit is
// set, which only matters to the slow path it triggers.
func suspicious(w uint64) uint64 {
	del := w ^ (ones * 0x7f)
	return (w | (w-ones*0x21) & ^w | (del-ones) & ^del) & high
}

// validRunes applies the rule rune by rune; every format character is
// outside ASCII, so only this path needs to look for them.
func validRunes(s string) bool {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
		s = s[size:]
	}
	return true
}
