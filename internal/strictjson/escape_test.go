package strictjson_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"latent.dev/admission/internal/strictjson"
)

// plainLine reports why a line is not one line of plain text, or "".
func plainLine(line string) string {
	if !utf8.ValidString(line) {
		return "invalid UTF-8"
	}
	for _, r := range line {
		if r == ' ' {
			continue
		}
		if !unicode.IsPrint(r) {
			return "holds " + strings.TrimPrefix(strings.TrimSuffix(strictjson.JoinKey("", string(r)), `"]`), `["`)
		}
	}
	return ""
}

func TestJoinKeyEscapes(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"limits", "p.limits"},
		{"max_queued-2", "p.max_queued-2"},
		{"", `p[""]`},
		{"a.b", `p["a.b"]`},
		{"a b", `p["a b"]`},
		{`q"uote\`, `p["q\"uote\\"]`},
		{"\x1b[2K\rok\n\x00", `p["\u001b[2K\rok\n\u0000"]`},
		{"\x7f\t", `p["\u007f\t"]`},
		{"bidi\u202eevil\u2066", `p["bidi\u202eevil\u2066"]`},
		{"zero\u200bwidth\ufeff", `p["zero\u200bwidth\ufeff"]`},
		{"line\u2028sep\u00a0", `p["line\u2028sep\u00a0"]`},
		{"tenant-é", `p["tenant-é"]`},
		{"\U000E0001tag", `p["\udb40\udc01tag"]`},
		{"bad\xffbyte", `p["bad\ufffdbyte"]`},
		{strings.Repeat("k", 100), `p["` + strings.Repeat("k", 64) + `"...(100 bytes)]`},
		{strings.Repeat("é", 40), `p["` + strings.Repeat("é", 32) + `"...(80 bytes)]`},
	} {
		if got := strictjson.JoinKey("p", c.key); got != c.want {
			t.Errorf("JoinKey(p, %q) = %s, want %s", c.key, got, c.want)
		}
	}
	if got := strictjson.JoinKey("", "a b"); got != `["a b"]` {
		t.Errorf("JoinKey at the root = %s", got)
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct{ prefix, path, want string }{
		{"policy", "", "policy"},
		{"policy", "tenants[0].id", "policy.tenants[0].id"},
		{"policy", `["a b"]`, `policy["a b"]`},
		{"", "x", "x"},
	} {
		if got := strictjson.Within(c.prefix, c.path); got != c.want {
			t.Errorf("Within(%q, %q) = %q, want %q", c.prefix, c.path, got, c.want)
		}
	}
}

// A problem always prints as one line of plain text, even one built from a
// caller's message.
func TestProblemStringIsOneLine(t *testing.T) {
	p := strictjson.Problem{Path: "a\nb", Message: "bad\r\nvalue \x1b[31mred"}
	if got, want := p.String(), `a\nb: bad\r\nvalue \u001b[31mred`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// The keys a document holds reach problems escaped: the attack of a key
// that rewrites the terminal line to read "ok".
func TestKeysInProblemsAreEscaped(t *testing.T) {
	doc := `{"\u001b[2K\rok\n\u0000": 1, "\u001b[2K\rok\n\u0000": 2, "n\u202e": {"\t": "x"}}`
	v, ps := strictjson.Parse([]byte(doc))
	d := strictjson.NewDecoder(ps)
	root := d.Object(v)
	inner := root.Object("n\u202e")
	inner.Uint64("\t")
	inner.Done()
	root.Done()
	assertProblems(t, d.Problems(),
		`["\u001b[2K\rok\n\u0000"]: duplicate key`,
		`["n\u202e"]["\t"]: expected a non-negative whole number, got a string`,
		`["\u001b[2K\rok\n\u0000"]: unknown key`)
}

func TestLongPathsAreShortened(t *testing.T) {
	key := strings.Repeat("k", 60)
	doc := strings.Repeat(`{"`+key+`":`, 40) + `[true]` + strings.Repeat("}", 40)
	v := mustParse(t, doc)
	leaf := v
	for leaf.Kind == strictjson.ObjectKind {
		leaf = leaf.Members[0].Value
	}
	leaf = leaf.Items[0]
	path := leaf.Path()
	if len(path) > strictjson.MaxPathBytes+3 {
		t.Errorf("path of %d bytes", len(path))
	}
	if !strings.HasPrefix(path, key+"."+key) || !strings.HasSuffix(path, "."+key+"[0]") || strings.Count(path, "...") != 1 {
		t.Errorf("path = %s; want the first and last steps around one ...", path)
	}
	if short := v.Members[0].Value.Members[0].Value.Path(); short != key+"."+key {
		t.Errorf("a short path = %s", short)
	}
}

// FuzzParse holds Parse and the readers to their promises on any input:
// no panic, and every problem one line of plain text.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"a": 1, "a": [1, 2, {"b": "c"}]}`,
		"{\"\\u001b[2K\\rok\\n\\u0000\": {\"\\u202e\": 1}}",
		"{\"\\u001b]0;owned\\u0007\": [\"\\u0000\", {\"\\u0000\": 1, \"\\u0000\": 2}]}",
		"{\"k\x00\": 1}",
		"{\"k\x1b\": 1}",
		"{\"a\":\x00}",
		`{"\ud800": 1, "\udc00\ud800\udc00": 2, "\u0085\u2028\u2029": 3}`,
		`[1e400, -0, 0.0000e-99999, 18446744073709551616, 1.5e3]`,
		`{"x": "` + strings.Repeat(`\"`, 50) + `"}`,
		strings.Repeat(`[`, 70),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ps := strictjson.Parse(data)
		agreesWithEncodingJSON(t, data, v, ps)
		d := strictjson.NewDecoder(ps)
		if v != nil {
			fuzzWalk(d, v)
		}
		for _, p := range d.Problems() {
			line := p.String()
			if strings.ContainsAny(line, "\n\r") {
				t.Fatalf("problem %q spans lines", line)
			}
			if why := plainLine(line); why != "" {
				t.Fatalf("problem %q %s", line, why)
			}
		}
	})
}

// fuzzWalk reads every value with every reader that fits its kind.
func fuzzWalk(d *strictjson.Decoder, v *strictjson.Value) {
	switch v.Kind {
	case strictjson.ObjectKind:
		o := d.Object(v)
		for _, m := range v.Members {
			if len(m.Key)%2 == 0 { // leave some keys unknown
				o.Get(m.Key)
			}
			fuzzWalk(d, m.Value)
		}
		o.Get("absent")
		o.Done()
		d.StringMap(v)
	case strictjson.Array:
		d.Strings(v)
		for _, it := range v.Items {
			fuzzWalk(d, it)
		}
	default:
		d.Uint64(v)
		d.Int64(v)
		d.Float(v)
		d.Millis(v)
		d.String(v)
	}
}
