// Package printable escapes text for one-line, terminal-safe output: the
// problems of a document, and the JSON paths inside them.
package printable

import (
	"unicode"
	"unicode/utf8"
)

// AppendRune appends r, or its JSON escape when r is not printable:
// control characters, format characters (bidi overrides, zero-width
// characters), separators other than the ASCII space, and invalid bytes
// (as U+FFFD).
func AppendRune(b []byte, r rune) []byte {
	switch {
	case r == '\n':
		return append(b, '\\', 'n')
	case r == '\r':
		return append(b, '\\', 'r')
	case r == '\t':
		return append(b, '\\', 't')
	case r < utf8.RuneSelf && r >= 0x20 && r != 0x7f:
		return append(b, byte(r))
	case r != utf8.RuneError && r >= utf8.RuneSelf && unicode.IsPrint(r):
		return utf8.AppendRune(b, r)
	case r > 0xFFFF:
		hi, lo := 0xD800+(r-0x10000)>>10, 0xDC00+(r-0x10000)&0x3FF
		return appendU(appendU(b, hi), lo)
	default:
		return appendU(b, r)
	}
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
}

// String returns s with every character that is not printable replaced
// by its JSON escape (`\n`, `\u001b`, `\u202e`), so that s prints as one
// line that cannot drive a terminal. Backslashes and quotes are left alone:
// use it for whole messages, not for values that must round-trip.
func String(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	b := append(make([]byte, 0, len(s)+16), s[:i]...)
	for _, r := range s[i:] {
		b = AppendRune(b, r)
	}
	return string(b)
}
