package strictjson

import (
	"strconv"
	"unicode/utf8"

	"latent.dev/admission/internal/printable"
)

// Path is the value's JSON path, such as `tenants[1].limits`; the root's is
// empty. It is built on each call by walking up to the root, so a path
// costs nothing until a problem is reported with it. A path longer than
// MaxPathBytes keeps its first and last steps and as many others as fit,
// with `...` for those left out.
func (v *Value) Path() string {
	var stack [MaxDepth + 2]*Value
	chain := stack[:0] // leaf first
	for n := v; n != nil && n.parent != nil; n = n.parent {
		chain = append(chain, n)
	}
	if len(chain) == 0 {
		return ""
	}
	// Measure each step, then choose the steps to show: from the root
	// while half the budget lasts, then from the leaf.
	var lengths [MaxDepth + 2]int
	total := 0
	for i, n := range chain {
		var buf [512]byte // one step, after some other (so with its dot)
		lengths[i] = len(appendStep(buf[:1], n)) - 1
		total += lengths[i]
	}
	head, tail := len(chain), 0 // steps shown from the root, from the leaf
	if total > MaxPathBytes {
		head, tail = 1, 1
		used := lengths[len(chain)-1] + lengths[0]
		for head < len(chain)-tail && used+lengths[len(chain)-1-head] <= MaxPathBytes/2 {
			used += lengths[len(chain)-1-head]
			head++
		}
		for head < len(chain)-tail && used+lengths[tail] <= MaxPathBytes {
			used += lengths[tail]
			tail++
		}
		if head+tail == len(chain) {
			head, tail = len(chain), 0
		}
	}
	b := make([]byte, 0, min(total, MaxPathBytes+len("...")+2*512))
	for i := len(chain) - 1; i >= len(chain)-head; i-- {
		b = appendStep(b, chain[i])
	}
	if tail > 0 {
		b = append(b, "..."...)
		for i := tail - 1; i >= 0; i-- {
			b = appendStep(b, chain[i])
		}
	}
	return string(b)
}

// appendStep appends the step from n's parent to n.
func appendStep(b []byte, n *Value) []byte {
	if n.parent.Kind == Array {
		return appendIndex(b, int(n.index))
	}
	return appendKey(b, n.key)
}

// JoinKey appends an object key to a path. A key of letters, digits, `_`
// and `-` is written `.key`; any other is written as a quoted string in
// brackets, `["a key"]`, with control, format and other unprintable
// characters escaped, so a path always prints as one line of plain text.
// Only the first MaxPathKeyBytes bytes of a longer key are shown.
func JoinKey(path, key string) string {
	return string(appendKey([]byte(path), key))
}

// Index appends an array index to a path.
func Index(path string, i int) string {
	return string(appendIndex([]byte(path), i))
}

func appendIndex(b []byte, i int) []byte {
	b = append(b, '[')
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, ']')
}

func appendKey(b []byte, key string) []byte {
	if plainKey(key) {
		if len(b) > 0 {
			b = append(b, '.')
		}
		return append(b, key...)
	}
	b = append(b, '[')
	if len(key) <= MaxPathKeyBytes {
		b = appendQuoted(b, key)
	} else {
		cut := MaxPathKeyBytes
		for cut > 0 && !utf8.RuneStart(key[cut]) {
			cut--
		}
		b = appendQuoted(b, key[:cut])
		b = append(b, "...("...)
		b = strconv.AppendInt(b, int64(len(key)), 10)
		b = append(b, " bytes)"...)
	}
	return append(b, ']')
}

func plainKey(key string) bool {
	if key == "" || len(key) > MaxPathKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// appendQuoted appends s as a JSON string whose text is all printable.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b = append(b, '\\', byte(r))
		default:
			b = printable.AppendRune(b, r)
		}
	}
	return append(b, '"')
}

// Within places a path, as a Problem holds it, under a prefix path: the
// problems of a policy embedded in a larger document, for instance.
func Within(prefix, path string) string {
	switch {
	case path == "":
		return prefix
	case prefix == "" || path[0] == '[':
		return prefix + path
	}
	return prefix + "." + path
}
