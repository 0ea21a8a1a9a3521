package policy

import (
	"unicode"
	"unicode/utf8"
)

// MinimumGeneratedIdentifierBytes is the smallest allowance a node may give
// generated identities (revision and release IDs are at most 83 bytes).
const MinimumGeneratedIdentifierBytes = 83

// ValidIdentifier reports whether s obeys the identifier rules: not empty,
// at most maxBytes bytes, valid UTF-8, and free of white space and control
// characters in Unicode's sense (unicode.IsSpace, unicode.IsControl).
func ValidIdentifier(s string, maxBytes uint32) bool {
	if len(s) == 0 || uint64(len(s)) > uint64(maxBytes) {
		return false
	}
	// Eight bytes at a time while they are all printable ASCII other than
	// space and DEL, which is what nearly every identifier is made of.
	i := 0
	for ; i+8 <= len(s); i += 8 {
		b := s[i : i+8]
		w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
			uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
		if !plainASCII(w) {
			break
		}
	}
	for ; i < len(s); i++ {
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

// plainASCII reports whether all eight bytes of w lie in 0x21..0x7e: none
// has its high bit set, none is below 0x21, and none equals 0x7f. Each
// test is the classic SWAR "has a byte less than n" (exact for n <= 128,
// and only asked once the high bits are known clear).
func plainASCII(w uint64) bool {
	if w&high != 0 {
		return false
	}
	below := (w - ones*0x21) & ^w & high
	del := w ^ (ones * 0x7f)
	isDel := (del - ones) & ^del & high
	return below|isDel == 0
}

func validRunes(s string) bool {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
		s = s[size:]
	}
	return true
}
