package strictjson

import "math"

// wholeResult says what a number literal is as a whole number.
type wholeResult uint8

const (
	wholeOK wholeResult = iota
	notWhole
	tooLarge
	notANumber
)

// wholeMagnitude reads a JSON number literal exactly, in one pass and
// without allocating: its sign and, when it is a whole number whose
// magnitude fits 64 bits, the magnitude. 9007199254740993.0 is exact, 1e3
// is 1000, 15e-1 is not whole, and 1e20 or a thousand-digit integer is too
// large, all without expanding the number.
func wholeMagnitude(s string) (neg bool, mag uint64, res wholeResult) {
	i := 0
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	// The digits of the integer and fraction parts, with the decimal point
	// removed, are d[0] d[1] ... d[n-1]; the integer part is the first
	// intDigits of them.
	digitsStart := i
	intDigits := 0
	for i < len(s) && isDigit(s[i]) {
		i++
		intDigits++
	}
	if intDigits == 0 {
		return neg, 0, notANumber
	}
	digitsEnd := i
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == digitsEnd+1 {
			return neg, 0, notANumber
		}
		digitsEnd = i
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return neg, 0, notANumber
		}
		for ; i < len(s) && isDigit(s[i]); i++ {
			if exp < 1e9 { // beyond this the answer cannot change
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return neg, 0, notANumber
	}

	// Find the first and last nonzero digits, by their index k among the
	// digits; the digit at k has place value 10^(intDigits-1-k+exp).
	first, last, k := -1, -1, 0
	for j := digitsStart; j < digitsEnd; j++ {
		if s[j] == '.' {
			continue
		}
		if s[j] != '0' {
			if first < 0 {
				first = k
			}
			last = k
		}
		k++
	}
	if first < 0 {
		return neg, 0, wholeOK // zero, in any notation
	}
	if intDigits-1-last+exp < 0 {
		return neg, 0, notWhole
	}
	trailingZeros := intDigits - 1 - last + exp
	if last-first+1+trailingZeros > 20 { // math.MaxUint64 has 20 digits
		return neg, 0, tooLarge
	}
	k = 0
	for j := digitsStart; j < digitsEnd; j++ {
		if s[j] == '.' {
			continue
		}
		if k >= first && k <= last {
			d := uint64(s[j] - '0')
			if mag > (math.MaxUint64-d)/10 {
				return neg, 0, tooLarge
			}
			mag = mag*10 + d
		}
		k++
	}
	for ; trailingZeros > 0; trailingZeros-- {
		if mag > math.MaxUint64/10 {
			return neg, 0, tooLarge
		}
		mag *= 10
	}
	return neg, mag, wholeOK
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
