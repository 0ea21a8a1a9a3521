package strhash

import (
	"strings"
	"testing"
)

// Every length up to 40 and every single-byte change of a string must
// change its hash; a collision among these few thousand strings would
// mean a byte or the length is not mixed in.
func TestEveryByteAndTheLengthCount(t *testing.T) {
	seen := map[uint64]string{}
	add := func(s string) {
		h := String(42, s)
		if prev, ok := seen[h]; ok && prev != s {
			t.Fatalf("%q and %q collide", prev, s)
		}
		seen[h] = s
	}
	for n := 0; n <= 40; n++ {
		base := strings.Repeat("a", n)
		add(base)
		for i := 0; i < n; i++ {
			for _, c := range []byte{'b', 0, 0xff} {
				b := []byte(base)
				b[i] = c
				add(string(b))
			}
		}
	}
}

func TestPairSeparatesItsHalves(t *testing.T) {
	if Pair(1, "ab", "c") == Pair(1, "a", "bc") || Pair(1, "", "x") == Pair(1, "x", "") {
		t.Fatal("a pair's halves run together")
	}
	if a, b := "acme", strings.Clone("acme"); Pair(1, a, "alice") != Pair(1, b, "alice") {
		t.Fatal("the hash depends on where the bytes are")
	}
}

func TestSeedChangesTheHash(t *testing.T) {
	for _, s := range []string{"", "a", "acme", "a-longer-tenant-name", strings.Repeat("x", 70)} {
		if String(1, s) == String(2, s) {
			t.Fatalf("%q hashes alike under two seeds", s)
		}
	}
}

// TestHighBitsSpread: tables index by the low bits and the catalog's trie
// by every five bits, so sequential names must spread in both.
func TestBitsSpread(t *testing.T) {
	const n = 4096
	for _, shift := range []uint{0, 5, 30, 59} {
		var buckets [32]int
		for i := 0; i < n; i++ {
			buckets[String(7, "tenant-"+itoa(i))>>shift&31]++
		}
		for b, c := range buckets {
			if c < n/32/2 || c > n/32*2 {
				t.Fatalf("shift %d: bucket %d holds %d of %d", shift, b, c, n)
			}
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func BenchmarkString(b *testing.B) {
	for _, s := range []string{"acme", "alice", "a-tenant-of-twenty-b", strings.Repeat("r", 68)} {
		b.Run(itoa(len(s)), func(b *testing.B) {
			var h uint64
			for b.Loop() {
				h += String(h, s)
			}
		})
	}
}

// TestPairsOfShortNamesDoNotCollide: the two-multiplication path for
// names of up to eight bytes, over every split of a few strings and a
// grid of tenant and subject names.
func TestPairsOfShortNamesDoNotCollide(t *testing.T) {
	seen := map[uint64][2]string{}
	add := func(a, b string) {
		h := Pair(9, a, b)
		if prev, ok := seen[h]; ok && prev != [2]string{a, b} {
			t.Fatalf("(%q, %q) and (%q, %q) collide", prev[0], prev[1], a, b)
		}
		seen[h] = [2]string{a, b}
	}
	for _, s := range []string{"acmealice", "abcdefghijklmnop", "aaaaaaaaaaaaaaaaaaaa"} {
		for i := 0; i <= len(s); i++ {
			add(s[:i], s[i:])
		}
	}
	for i := 0; i < 200; i++ {
		for j := 0; j < 50; j++ {
			add("t"+itoa(i), "u"+itoa(j))
		}
	}
}

func TestHashingAllocatesNothing(t *testing.T) {
	long := strings.Repeat("x", 70)
	if n := testing.AllocsPerRun(100, func() { _ = String(1, long) + Pair(1, "acme", "alice") + Pair(1, long, "a") }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkPair(b *testing.B) {
	var h uint64
	for b.Loop() {
		h += Pair(h, "acme", "alice")
	}
}

// TestShortWithTheLengthIsTheString: for strings of at most eight bytes
// the length and the Short word decide equality (the allowlist compares
// nothing else), and PairWords over them is Pair.
func TestShortWithTheLengthIsTheString(t *testing.T) {
	same := func(a, b string) bool { return len(a) == len(b) && Short(a) == Short(b) }
	words := []string{"", "a", "b", "ab", "ba", "abc", "acb", "cba", "abcd", "abce", "abcde", "abdde", "acme", "acme1",
		"abcdefgh", "abcdefgi", "bbcdefgh", "abcdabcd", "aaaaaaaa"}
	for _, a := range words {
		for _, b := range words {
			if same(a, b) != (a == b) {
				t.Fatalf("%q and %q: same %v", a, b, !(a == b))
			}
			if Pair(3, a, b) != PairWords(3, Short(a), Short(b), len(a), len(b)) {
				t.Fatalf("PairWords of (%q, %q) is not Pair", a, b)
			}
		}
	}
	// Every single-byte change of every short length.
	for n := 1; n <= 8; n++ {
		base := strings.Repeat("q", n)
		for i := 0; i < n; i++ {
			b := []byte(base)
			b[i] = 'r'
			if same(base, string(b)) {
				t.Fatalf("%q and %q read alike", base, b)
			}
		}
	}
}
