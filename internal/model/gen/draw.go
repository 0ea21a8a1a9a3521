package gen

import "pgregory.net/rapid"

// Int draws an int in [lo, hi].
func Int(t *rapid.T, lo, hi int, label string) int { return rapid.IntRange(lo, hi).Draw(t, label) }

// Chance is true with probability about num/den. The draw is arranged so
// that a small value means the likelier outcome: rare branches stay rare
// and failures shrink toward the ordinary path.
func Chance(t *rapid.T, num, den int, label string) bool {
	v := Int(t, 0, 15, label)*16 + Int(t, 0, 15, label+".low")
	threshold := 256 * num / den
	if 2*num <= den {
		return v >= 256-threshold
	}
	return v < threshold
}

// Pick draws an element of from, favouring the first ones.
func Pick[E any](t *rapid.T, from []E, label string) E { return rapid.SampledFrom(from).Draw(t, label) }

// PickFlat is Pick for long lists: the index is drawn as two digits of at
// most eight values each, which keeps the tail of the list reachable.
func PickFlat[E any](t *rapid.T, from []E, label string) E {
	groups := (len(from) + 7) / 8
	i := Int(t, 0, groups-1, label+".group")*8 + Int(t, 0, 7, label+".member")
	return from[i%len(from)]
}
