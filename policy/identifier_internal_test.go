package policy

import (
	"math/rand/v2"
	"testing"
)

// plainWord is suspicious's contract read byte by byte: every byte of w
// lies in 0x21..0x7e.
func plainWord(w uint64) bool {
	for i := 0; i < 8; i++ {
		if b := byte(w >> (8 * i)); b <= ' ' || b >= 0x7f {
			return false
		}
	}
	return true
}

// suspicious is zero exactly for words of plain bytes. A word it wrongly
// flags would only cost the slow path, so the identifier tests cannot see
// it; this test holds the fast path to its contract.
func TestSuspiciousIsZeroExactlyForPlainWords(t *testing.T) {
	check := func(w uint64) {
		t.Helper()
		if got, want := suspicious(w) == 0, plainWord(w); got != want {
			t.Fatalf("suspicious(%#016x) == 0 is %v, want %v", w, got, want)
		}
	}
	// Every byte value at every position, among plain bytes at both ends
	// of the range and between them.
	for _, fill := range []byte{'!', '0', 'a', '~'} {
		for pos := 0; pos < 8; pos++ {
			for b := 0; b < 256; b++ {
				var w uint64
				for i := 0; i < 8; i++ {
					c := fill
					if i == pos {
						c = byte(b)
					}
					w |= uint64(c) << (8 * i)
				}
				check(w)
			}
		}
	}
	// Words of random plain bytes, and random words.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w uint64
		for i := 0; i < 8; i++ {
			w |= uint64(0x21+rng.IntN(0x7f-0x21)) << (8 * i)
		}
		check(w)
		check(rng.Uint64())
	}
}

// The table of the short path marks exactly the bytes outside 0x21..0x7e.
func TestNotPlainMarksExactlyTheBytesOutsideThePlainRange(t *testing.T) {
	for b := 0; b < 256; b++ {
		if got, want := notPlain[b] != 0, b <= ' ' || b >= 0x7f; got != want {
			t.Errorf("notPlain[%#x] = %d", b, notPlain[b])
		}
	}
}
