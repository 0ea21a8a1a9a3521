package strictjson_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"latent.dev/admission/internal/strictjson"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func mustParse(t *testing.T, doc string) *strictjson.Value {
	t.Helper()
	v, ps := strictjson.Parse([]byte(doc))
	if v == nil || len(ps) != 0 {
		t.Fatalf("Parse(%s) = %v, %v", doc, v, ps)
	}
	return v
}

func assertProblems(t *testing.T, got strictjson.Problems, want ...string) {
	t.Helper()
	lines := make([]string, len(got))
	for i, p := range got {
		lines[i] = p.String()
	}
	if want == nil {
		want = []string{}
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("problems:\n\t%s\nwant:\n\t%s", strings.Join(lines, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func TestParseKeepsOrderAndPaths(t *testing.T) {
	v := mustParse(t, `{"b": [1, {"c": "x"}], "a": null, "t": true}`)
	if v.Kind != strictjson.ObjectKind || v.Path() != "" || len(v.Members) != 3 {
		t.Fatalf("root = %+v", v)
	}
	keys := []string{v.Members[0].Key, v.Members[1].Key, v.Members[2].Key}
	if !reflect.DeepEqual(keys, []string{"b", "a", "t"}) {
		t.Errorf("keys = %q, want document order", keys)
	}
	b := v.Members[0].Value
	if b.Kind != strictjson.Array || b.Path() != "b" || b.Items[0].Path() != "b[0]" || b.Items[0].Number != "1" {
		t.Errorf("b = %+v", b)
	}
	c := b.Items[1].Members[0].Value
	if c.Path() != "b[1].c" || c.Kind != strictjson.String || c.String != "x" {
		t.Errorf("b[1].c = %+v", c)
	}
	if a := v.Members[1].Value; a.Kind != strictjson.Null || a.Path() != "a" {
		t.Errorf("a = %+v", a)
	}
	if tr := v.Members[2].Value; tr.Kind != strictjson.Bool || !tr.Bool {
		t.Errorf("t = %+v", tr)
	}
}

func TestParseReportsDuplicateKeysAndKeepsTheFirst(t *testing.T) {
	v, ps := strictjson.Parse([]byte(`{"a": 1, "a": 2, "b": {"c": 1, "c": {"x": 1}}, "d": [{"e": 1, "e": 1}], "a": 3}`))
	if v == nil {
		t.Fatal("Parse returned no tree")
	}
	assertProblems(t, ps, "a: duplicate key", "b.c: duplicate key", "d[0].e: duplicate key", "a: duplicate key")
	if len(v.Members) != 3 || v.Members[0].Value.Number != "1" {
		t.Errorf("members = %+v; want a (first value 1), b, d", v.Members)
	}
	if c := v.Members[1].Value.Members; len(c) != 1 || c[0].Value.Kind != strictjson.Number {
		t.Errorf("b = %+v; want only the first c", c)
	}
}

func TestParseSyntaxErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want string // message prefix
	}{
		{"empty input", ``, "invalid JSON: unexpected end of input"},
		{"white space only", " \n\t", "invalid JSON: unexpected end of input"},
		{"unclosed object", `{"a": 1`, "invalid JSON: unexpected end of input"},
		{"unclosed string", `{"a": "x`, "invalid JSON: unexpected end of input"},
		{"missing value", `{"a": }`, "invalid JSON at byte "},
		{"trailing comma", `{"a": 1,}`, "invalid JSON at byte "},
		{"bare word", `nope`, "invalid JSON at byte "},
		{"single quotes", `{'a': 1}`, "invalid JSON at byte "},
		{"comment", `{"a": 1 /* c */}`, "invalid JSON at byte "},
		{"invalid UTF-8 in a string", "{\"a\": \"\xff\"}", "invalid JSON: not valid UTF-8"},
		{"invalid UTF-8 in a key", "{\"\xc3\": 1}", "invalid JSON: not valid UTF-8"},
		{"data after the value", `{} {}`, "unexpected data after the top-level value"},
		{"garbage after the value", `{} x`, "unexpected data after the top-level value"},
		{"closing bracket after the value", `{}]`, "unexpected data after the top-level value"},
		{"second scalar", `1 2`, "unexpected data after the top-level value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ps := strictjson.Parse([]byte(c.doc))
			if v != nil {
				t.Errorf("Parse returned a tree")
			}
			if len(ps) != 1 || ps[0].Path != "" || !strings.HasPrefix(ps[0].Message, c.want) {
				t.Errorf("problems = %q, want one pathless %q...", ps, c.want)
			}
		})
	}
}

// Duplicate keys found before a syntax error are still reported.
func TestParseSyntaxErrorKeepsEarlierProblems(t *testing.T) {
	v, ps := strictjson.Parse([]byte(`{"a": 1, "a": 2, `))
	if v != nil {
		t.Error("Parse returned a tree")
	}
	assertProblems(t, ps, "a: duplicate key", "invalid JSON: unexpected end of input")
}

func TestParseAcceptsTrailingWhiteSpace(t *testing.T) {
	mustParse(t, "{}\n\t \r\n")
}

func TestParseDepthLimit(t *testing.T) {
	const limit = 64
	for _, open := range []string{"[", `{"k":`} {
		closeOne := "]"
		if open != "[" {
			closeOne = "}"
		}
		nested := func(depth int) string {
			return strings.Repeat(open, depth) + "1" + strings.Repeat(closeOne, depth)
		}
		t.Run(open+" at the limit", func(t *testing.T) {
			mustParse(t, nested(limit))
		})
		t.Run(open+" beyond the limit", func(t *testing.T) {
			v, ps := strictjson.Parse([]byte(nested(limit + 1)))
			if v != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "nesting too deep") {
				t.Errorf("Parse = %v, %q; want nesting too deep", v, ps)
			}
		})
	}
	t.Run("far beyond the limit", func(t *testing.T) {
		v, ps := strictjson.Parse([]byte(strings.Repeat("[", 1<<20)))
		if v != nil || len(ps) != 1 || !strings.Contains(ps[0].Message, "nesting too deep") {
			t.Errorf("Parse = %v, %q; want nesting too deep", v, ps)
		}
	})
}

func TestObjectReportsUnknownKeysSorted(t *testing.T) {
	v := mustParse(t, `{"zeta": 1, "used": 1, "alpha": 1, "mid": {"x": 1}}`)
	d := strictjson.NewDecoder(nil)
	o := d.Object(v)
	o.Uint64("used")
	o.Done()
	assertProblems(t, d.Problems(), "alpha: unknown key", "mid: unknown key", "zeta: unknown key")
}

func TestObjectReportsMissingKeys(t *testing.T) {
	v := mustParse(t, `{"a": {"b": {}}}`)
	d := strictjson.NewDecoder(nil)
	o := d.Object(v)
	a := o.Object("a")
	b := a.Object("b")
	b.String("s")
	b.Uint64("n")
	b.Done()
	a.Done()
	o.Done()
	assertProblems(t, d.Problems(), "a.b.s: missing", "a.b.n: missing")
}

// Under a missing or mistyped parent, the keys read from it are not
// reported again: the parent's problem already says it all.
func TestBrokenParentHidesItsKeys(t *testing.T) {
	for _, doc := range []string{`{}`, `{"parent": 5}`, `{"parent": [1]}`, `{"parent": null}`} {
		t.Run(doc, func(t *testing.T) {
			d := strictjson.NewDecoder(nil)
			root := d.Object(mustParse(t, doc))
			parent := root.Object("parent")
			if parent.Path() != "parent" {
				t.Errorf("Path() = %q", parent.Path())
			}
			parent.String("s")
			parent.Uint64("n")
			parent.Uint64Max("m", 3)
			parent.Millis("ms")
			parent.Float("f")
			parent.Strings("list")
			parent.Array("items")
			child := parent.Object("child")
			child.String("deep")
			child.Done()
			parent.Done()
			root.Done()
			if got := d.Problems(); len(got) != 1 || got[0].Path != "parent" {
				t.Errorf("problems = %q; want only one, at parent", got)
			}
		})
	}
}

func TestOptional(t *testing.T) {
	v := mustParse(t, `{"present": 7, "null": null, "ms": 5}`)
	d := strictjson.NewDecoder(nil)
	o := d.Object(v)
	if n, ok := o.OptionalUint64("present"); !ok || n != 7 {
		t.Errorf("OptionalUint64(present) = %d, %v", n, ok)
	}
	if _, ok := o.OptionalUint64("null"); ok {
		t.Error("a null optional key reads as present")
	}
	if _, ok := o.OptionalUint64("absent"); ok {
		t.Error("an absent optional key reads as present")
	}
	if ms, ok := o.OptionalMillis("ms"); !ok || ms != 5*time.Millisecond {
		t.Errorf("OptionalMillis(ms) = %v, %v", ms, ok)
	}
	if !o.Has("null") || o.Has("absent") {
		t.Error("Has disagrees with the document")
	}
	o.Done()
	assertProblems(t, d.Problems())
}

func readNumber(t *testing.T, doc string, read func(d *strictjson.Decoder, v *strictjson.Value) (any, bool)) (any, bool, strictjson.Problems) {
	t.Helper()
	v := mustParse(t, `{"n": `+doc+`}`)
	d := strictjson.NewDecoder(nil)
	got, ok := read(d, v.Members[0].Value)
	return got, ok, d.Problems()
}

func TestUint64(t *testing.T) {
	cases := []struct {
		doc     string
		want    uint64
		problem string
	}{
		{"0", 0, ""},
		{"42", 42, ""},
		{"18446744073709551615", math.MaxUint64, ""},
		{"18446744073709551616", 0, "n: is out of range (at most 18446744073709551615)"},
		{"100000000000000000000000", 0, "n: is out of range (at most 18446744073709551615)"},
		{"-1", 0, "n: must not be negative"},
		{"-0", 0, "n: must not be negative"},
		{"1.5", 0, "n: must be a whole number"},
		{"0.0000001", 0, "n: must be a whole number"},
		{"1.0", 1, ""},
		{"1e3", 1000, ""},
		{"1E3", 1000, ""},
		{"15e-1", 0, "n: must be a whole number"},
		{`"1"`, 0, "n: expected a non-negative whole number, got a string"},
		{`true`, 0, "n: expected a non-negative whole number, got a boolean"},
		{`null`, 0, "n: expected a non-negative whole number, got null"},
		{`[1]`, 0, "n: expected a non-negative whole number, got an array"},
		{`{}`, 0, "n: expected a non-negative whole number, got an object"},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Uint64(v) })
			checkRead(t, got, ok, ps, c.want, c.problem)
		})
	}
}

// A whole number written with a fraction or an exponent must decode to
// exactly the number written, as the plain form does.
func TestUint64IsExactInEveryNotation(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want uint64
	}{
		{"9007199254740993.0", 9007199254740993},
		{"18446744073709551615.0", math.MaxUint64},
	} {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Uint64(v) })
			if !ok || got != c.want {
				t.Fatalf("got %v, %v, %q; want %d", got, ok, ps, c.want)
			}
		})
	}
}

func checkRead[T comparable](t *testing.T, got any, ok bool, ps strictjson.Problems, want T, problem string) {
	t.Helper()
	if problem == "" {
		if !ok || got != want {
			t.Errorf("read = %v, %v; want %v", got, ok, want)
		}
		assertProblems(t, ps)
		return
	}
	if ok {
		t.Errorf("read = %v, true; want a failure", got)
	}
	assertProblems(t, ps, problem)
}

func TestUint64Max(t *testing.T) {
	for _, c := range []struct {
		doc     string
		problem string
	}{
		{"10", ""},
		{"11", "n: is out of range (at most 10)"},
		{"-1", "n: must not be negative"},
	} {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Uint64Max(v, 10) })
			checkRead(t, got, ok, ps, uint64(10), c.problem)
		})
	}
}

func TestMillis(t *testing.T) {
	maxMillis := uint64(math.MaxInt64 / int64(time.Millisecond))
	cases := []struct {
		doc     string
		want    time.Duration
		problem string
	}{
		{"0", 0, ""},
		{"1500", 1500 * time.Millisecond, ""},
		{fmt.Sprint(maxMillis), time.Duration(maxMillis) * time.Millisecond, ""},
		{fmt.Sprint(maxMillis + 1), 0, fmt.Sprintf("n: does not fit a duration (at most %d milliseconds)", maxMillis)},
		{"18446744073709551615", 0, fmt.Sprintf("n: does not fit a duration (at most %d milliseconds)", maxMillis)},
		{"-5", 0, "n: must not be negative"},
		{"0.5", 0, "n: must be a whole number"},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Millis(v) })
			checkRead(t, got, ok, ps, c.want, c.problem)
		})
	}
}

func TestFloat(t *testing.T) {
	cases := []struct {
		doc     string
		want    float64
		problem string
	}{
		{"0.85", 0.85, ""},
		{"-2", -2, ""},
		{"1e-400", 0, ""},
		{"1e400", 0, "n: is not a finite number"},
		{"-1e400", 0, "n: is not a finite number"},
		{`"0.5"`, 0, "n: expected a number, got a string"},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Float(v) })
			checkRead(t, got, ok, ps, c.want, c.problem)
		})
	}
}

func TestStrings(t *testing.T) {
	d := strictjson.NewDecoder(nil)
	o := d.Object(mustParse(t, `{"good": ["a", "b"], "empty": [], "mixed": ["a", 1, null], "wrong": "a"}`))
	if got := o.Strings("good"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("good = %q", got)
	}
	if got := o.Strings("empty"); got == nil || len(got) != 0 {
		t.Errorf("empty = %#v, want an empty, non-nil list", got)
	}
	o.Strings("mixed")
	if got := o.Strings("wrong"); got != nil {
		t.Errorf("wrong = %q, want nil", got)
	}
	o.Done()
	assertProblems(t, d.Problems(),
		"mixed[1]: expected a string, got a number",
		"mixed[2]: expected a string, got null",
		"wrong: expected an array, got a string")
}

func TestStringMap(t *testing.T) {
	d := strictjson.NewDecoder(nil)
	v := mustParse(t, `{"ok": {"a": "1", "b": "2"}, "bad": {"a": 1}, "wrong": []}`)
	m, ok := d.StringMap(v.Members[0].Value)
	if !ok || !reflect.DeepEqual(m, map[string]string{"a": "1", "b": "2"}) {
		t.Errorf("StringMap(ok) = %v, %v", m, ok)
	}
	if _, ok := d.StringMap(v.Members[1].Value); ok {
		t.Error("StringMap(bad) succeeded")
	}
	if _, ok := d.StringMap(v.Members[2].Value); ok {
		t.Error("StringMap(wrong) succeeded")
	}
	assertProblems(t, d.Problems(), "bad.a: expected a string, got a number", "wrong: expected an object, got an array")
}

func TestDecoderErr(t *testing.T) {
	d := strictjson.NewDecoder(nil)
	if err := d.Err(); err != nil {
		t.Fatalf("Err() with no problems = %v", err)
	}
	d.Problemf("a.b", "is %d", 3)
	var ps strictjson.Problems
	if err := d.Err(); !errors.As(err, &ps) || len(ps) != 1 || ps[0] != (strictjson.Problem{Path: "a.b", Message: "is 3"}) {
		t.Errorf("Err() = %v", err)
	}
}

// The decoder owns its copy of the initial problems.
func TestNewDecoderCopiesInitialProblems(t *testing.T) {
	initial := make(strictjson.Problems, 1, 4)
	initial[0] = strictjson.Problem{Path: "x", Message: "first"}
	d := strictjson.NewDecoder(initial)
	d.Problemf("y", "second")
	if got := initial[:2][1]; got != (strictjson.Problem{}) {
		t.Errorf("Problemf wrote %v into the caller's slice", got)
	}
	initial[0].Message = "changed"
	assertProblems(t, d.Problems(), "x: first", "y: second")
}

func TestProblemsText(t *testing.T) {
	ps := strictjson.Problems{
		{Path: "tenants[1].limits.max_queued_reservations", Message: "missing"},
		{Message: "invalid JSON: unexpected end of input"},
	}
	const want = "tenants[1].limits.max_queued_reservations: missing\ninvalid JSON: unexpected end of input"
	if got := ps.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestAsProblems(t *testing.T) {
	if got := strictjson.AsProblems(nil); got != nil {
		t.Errorf("AsProblems(nil) = %v", got)
	}
	ps := strictjson.Problems{{Path: "a", Message: "missing"}}
	if got := strictjson.AsProblems(fmt.Errorf("wrapped: %w", ps)); !reflect.DeepEqual(got, ps) {
		t.Errorf("AsProblems(wrapped) = %v", got)
	}
	if got := strictjson.AsProblems(errors.New("disk on fire")); !reflect.DeepEqual(got, strictjson.Problems{{Message: "disk on fire"}}) {
		t.Errorf("AsProblems(other) = %v", got)
	}
}

func TestPaths(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{strictjson.JoinKey("", "a"), "a"},
		{strictjson.JoinKey("a", "b"), "a.b"},
		{strictjson.JoinKey("a[0]", "b"), "a[0].b"},
		{strictjson.Index("", 3), "[3]"},
		{strictjson.Index("a", 0), "a[0]"},
		{strictjson.Index("a[1]", 2), "a[1][2]"},
	} {
		if c.got != c.want {
			t.Errorf("path = %q, want %q", c.got, c.want)
		}
	}
}

func TestKindNames(t *testing.T) {
	want := map[strictjson.Kind]string{
		strictjson.Null: "null", strictjson.Bool: "a boolean", strictjson.Number: "a number",
		strictjson.String: "a string", strictjson.Array: "an array", strictjson.ObjectKind: "an object",
	}
	for k, w := range want {
		if k.String() != w {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k, w)
		}
	}
}
