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
		{"zero-width space is no white space in Unicode's sense", "a\u200bb", 64, true},

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
// as plainly as possible.
func referenceValidIdentifier(s string, maxBytes uint32) bool {
	if s == "" || uint64(len(s)) > uint64(maxBytes) || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
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
	for _, s := range []string{"acme", "", "a b", "café", "\xff", "\ufffd", "a\u0085b", strings.Repeat("x", 65)} {
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
	for _, s := range []string{"acme", "café-日本", "a b", "a\xffb", strings.Repeat("x", 65)} {
		if allocs := testing.AllocsPerRun(100, func() { policy.ValidIdentifier(s, 64) }); allocs != 0 {
			t.Errorf("ValidIdentifier(%q) allocates %v times", s, allocs)
		}
	}
}
