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
