package policy_test

import (
	"math"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"latent.dev/admission/policy"
)

func TestValidIdentifier(t *testing.T) {
	cases := []struct {
		name string
		s    string
		max  uint32
		want bool
	}{
		{"plain ASCII", "acme", 64, true},
		{"punctuation", "a-b_c.d:e/f@g", 64, true},
		{"empty", "", 64, false},
		{"empty with no allowance", "", 0, false},
		{"any identifier with no allowance", "a", 0, false},
		{"exactly the allowance", "abc", 3, true},
		{"one byte over the allowance", "abcd", 3, false},
		{"huge allowance", "a", math.MaxUint32, true},
		{"non-ASCII", "café", 64, true},
		{"non-ASCII exactly the allowance in bytes", "café", 5, true},
		{"non-ASCII one byte over the allowance", "café", 4, false},
		{"CJK", "日本語", 9, true},
		{"emoji", "🙂", 4, true},
		{"literal U+FFFD", "\ufffd", 3, true},
		{"literal U+FFFD inside", "a\ufffdb", 64, true},
		{"U+00B7 middle dot is no format character", "a\u00b7b", 64, true},
		{"U+200E's neighbour U+2010 hyphen is no format character", "a\u2010b", 64, true},

		{"space", "a b", 64, false},
		{"leading space", " a", 64, false},
		{"trailing space", "a ", 64, false},
		{"tab", "a\tb", 64, false},
		{"newline", "a\nb", 64, false},
		{"carriage return", "a\rb", 64, false},
		{"vertical tab", "a\vb", 64, false},
		{"form feed", "a\fb", 64, false},
		{"NUL", "a\x00b", 64, false},
		{"unit separator", "a\x1fb", 64, false},
		{"DEL", "a\x7fb", 64, false},
		{"U+0080 control", "a\u0080b", 64, false},
		{"U+0085 next line", "a\u0085b", 64, false},
		{"U+009F control", "a\u009fb", 64, false},
		{"U+00A0 no-break space", "a\u00a0b", 64, false},
		{"U+1680 ogham space", "a\u1680b", 64, false},
		{"U+2003 em space", "a\u2003b", 64, false},
		{"U+2028 line separator", "a\u2028b", 64, false},
		{"U+2029 paragraph separator", "a\u2029b", 64, false},
		{"U+3000 ideographic space", "a\u3000b", 64, false},
		{"ASCII space after a non-ASCII rune", "é b", 64, false},
		{"ASCII control after a non-ASCII rune", "é\x01", 64, false},

		{"U+00AD soft hyphen", "a\u00adb", 64, false},
		{"U+200B zero-width space", "a\u200bb", 64, false},
		{"U+200C zero-width non-joiner", "a\u200cb", 64, false},
		{"U+200D zero-width joiner", "a\u200db", 64, false},
		{"U+200E left-to-right mark", "a\u200eb", 64, false},
		{"U+202A left-to-right embedding", "a\u202ab", 64, false},
		{"U+202E right-to-left override", "a\u202eb", 64, false},
		{"U+2060 word joiner", "a\u2060b", 64, false},
		{"U+2066 left-to-right isolate", "a\u2066b", 64, false},
		{"U+2067 right-to-left isolate", "a\u2067b", 64, false},
		{"U+2068 first strong isolate", "a\u2068b", 64, false},
		{"U+2069 pop directional isolate", "a\u2069b", 64, false},
		{"U+FEFF byte-order mark", "\ufeffab", 64, false},
		{"U+FEFF byte-order mark inside", "a\ufeffb", 64, false},
		{"U+E0001 language tag", "a\U000e0001b", 64, false},
		{"right-to-left override in a long identifier", "invoice-" + "\u202e" + "fdp.exe-0123456789", 64, false},

		{"invalid byte 0xff", "\xff", 64, false},
		{"invalid byte 0xff inside", "a\xffb", 64, false},
		{"invalid byte after a non-ASCII rune", "café\xff", 64, false},
		{"truncated rune", "caf\xc3", 64, false},
		{"lone continuation byte", "a\x80", 64, false},
		{"overlong encoding", "\xc0\xaf", 64, false},
		{"encoded surrogate", "\xed\xa0\x80", 64, false},
		{"beyond U+10FFFF", "\xf4\x90\x80\x80", 64, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := policy.ValidIdentifier(c.s, c.max); got != c.want {
				t.Errorf("ValidIdentifier(%q, %d) = %v, want %v", c.s, c.max, got, c.want)
			}
			if got := referenceValidIdentifier(c.s, c.max); got != c.want {
				t.Errorf("reference(%q, %d) = %v, want %v; the table or the reference is wrong", c.s, c.max, got, c.want)
			}
		})
	}
}

// referenceValidIdentifier is ValidIdentifier's documented rule, written
// as plainly as possible: a rune-by-rune reading with no fast path.
func referenceValidIdentifier(s string, maxBytes uint32) bool {
	if s == "" || uint64(len(s)) > uint64(maxBytes) || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// identifierBreakers are one of each kind of character or byte sequence
// the rule refuses.
var identifierBreakers = []struct{ name, s string }{
	{"space", " "},
	{"tab", "\t"},
	{"NUL", "\x00"},
	{"unit separator", "\x1f"},
	{"DEL", "\x7f"},
	{"C1 control", "\u0085"},
	{"no-break space", "\u00a0"},
	{"soft hyphen", "\u00ad"},
	{"zero-width space", "\u200b"},
	{"right-to-left override", "\u202e"},
	{"first strong isolate", "\u2068"},
	{"byte-order mark", "\ufeff"},
	{"ideographic space", "\u3000"},
	{"invalid byte", "\xff"},
	{"lone continuation byte", "\x80"},
	{"truncated rune", "\xe2\x80"},
}

// identifierFillers are runs of accepted characters that surround a
// breaker: plain ASCII (the word-at-a-time path), ASCII holding the edges
// of the accepted byte range, and non-ASCII (the rune path).
var identifierFillers = []struct{ name, unit string }{
	{"ASCII", "abcdefghijklmnopqrstuvwxyz0123456789"},
	{"ASCII range edges", "!~"},
	{"non-ASCII", "aé"},
}

// filler returns the first n bytes of repeated unit, cut back to a rune
// boundary.
func filler(unit string, n int) string {
	s := strings.Repeat(unit, n/len(unit)+1)[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// A breaker at any position of an identifier of any length up to 200
// bytes is refused exactly when the rune-by-rune reading refuses it; the
// long identifiers reach every word and the overlapping tail of the
// word-at-a-time path.
func TestValidIdentifierMatchesReferenceAtEveryPosition(t *testing.T) {
	const maxLength = 200
	for _, fill := range identifierFillers {
		for n := 0; n <= maxLength; n++ {
			base := filler(fill.unit, n)
			if got, want := policy.ValidIdentifier(base, maxLength), base != ""; got != want {
				t.Fatalf("%s filler of %d bytes: ValidIdentifier(%q) = %v, want %v", fill.name, len(base), base, got, want)
			}
			for _, bad := range identifierBreakers {
				for i := 0; i <= len(base); i++ {
					if i < len(base) && !utf8.RuneStart(base[i]) {
						continue // inside a rune of the filler
					}
					s := base[:i] + bad.s + base[i:]
					for _, limit := range []uint32{uint32(len(s)), uint32(len(s)) - 1} {
						got, want := policy.ValidIdentifier(s, limit), referenceValidIdentifier(s, limit)
						if got != want {
							t.Fatalf("%s at byte %d of a %d-byte %s identifier, limit %d: ValidIdentifier(%q) = %v, reference says %v",
								bad.name, i, len(s), fill.name, limit, s, got, want)
						}
						if limit == uint32(len(s)) && got {
							t.Fatalf("%s at byte %d of a %d-byte %s identifier is accepted", bad.name, i, len(s), fill.name)
						}
					}
				}
			}
		}
	}
}

// Every byte value, at every position of every length up to 40 bytes of
// plain ASCII, is judged as the reference judges it: the word-at-a-time
// test flags exactly the bytes outside 0x21..0x7e.
func TestValidIdentifierEveryByteAtEveryPosition(t *testing.T) {
	const maxLength = 40
	for n := 1; n <= maxLength; n++ {
		base := []byte(filler("abcdefghijklmnopqrstuvwxyz", n))
		for i := range base {
			for b := 0; b < 256; b++ {
				s := []byte(string(base))
				s[i] = byte(b)
				got, want := policy.ValidIdentifier(string(s), maxLength), referenceValidIdentifier(string(s), maxLength)
				if got != want {
					t.Fatalf("byte %#x at %d of %d: ValidIdentifier(%q) = %v, reference says %v", b, i, n, s, got, want)
				}
				if want != (b > ' ' && b < 0x7f) {
					t.Fatalf("byte %#x at %d of %d: reference says %v", b, i, n, want)
				}
			}
		}
	}
}

// Every code point, alone and between ASCII letters, is judged as the
// reference judges it: the ASCII fast path and the rune path agree.
func TestValidIdentifierMatchesReferenceForEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		enc := string(r) // surrogates encode as U+FFFD, which is valid
		for _, s := range []string{enc, "a" + enc + "b", "é" + enc} {
			if got, want := policy.ValidIdentifier(s, 64), referenceValidIdentifier(s, 64); got != want {
				t.Fatalf("ValidIdentifier(%q) = %v, reference says %v", s, got, want)
			}
		}
	}
}

func FuzzValidIdentifier(f *testing.F) {
	for _, s := range []string{"acme", "", "a b", "café", "\xff", "\ufffd", "a\u0085b", "a\u202eb", "\ufeff", strings.Repeat("x", 65), strings.Repeat("x", 40) + "\x7f" + strings.Repeat("x", 40)} {
		f.Add(s, uint32(64))
	}
	f.Fuzz(func(t *testing.T, s string, maxBytes uint32) {
		if got, want := policy.ValidIdentifier(s, maxBytes), referenceValidIdentifier(s, maxBytes); got != want {
			t.Fatalf("ValidIdentifier(%q, %d) = %v, reference says %v", s, maxBytes, got, want)
		}
	})
}

// Identifiers are checked on the request path; the check must not
// allocate, whether it accepts or rejects.
func TestValidIdentifierDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"acme", "café-日本", "a b", "a\xffb", "a\u202eb", strings.Repeat("x", 65), strings.Repeat("x", 150)} {
		if allocs := testing.AllocsPerRun(100, func() { policy.ValidIdentifier(s, 64) }); allocs != 0 {
			t.Errorf("ValidIdentifier(%q) allocates %v times", s, allocs)
		}
	}
}
