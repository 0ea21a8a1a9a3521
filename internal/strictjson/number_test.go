package strictjson_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"latent.dev/admission/internal/strictjson"
)

func TestInt64(t *testing.T) {
	cases := []struct {
		doc     string
		want    int64
		problem string
	}{
		{"0", 0, ""},
		{"-0", 0, ""},
		{"-42", -42, ""},
		{"-1.0", -1, ""},
		{"9223372036854775807", math.MaxInt64, ""},
		{"-9223372036854775808", math.MinInt64, ""},
		{"-92233720368547758.08e2", math.MinInt64, ""},
		{"9223372036854775808", 0, "n: is out of range"},
		{"-9223372036854775809", 0, "n: is out of range"},
		{"1e18", 1e18, ""},
		{"1e19", 0, "n: is out of range"},
		{"-15e-1", 0, "n: must be a whole number"},
		{"1e-999999999999", 0, "n: must be a whole number"},
		{"0e999999999999", 0, ""},
		{`"1"`, 0, "n: expected a whole number, got a string"},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Int64(v) })
			checkRead(t, got, ok, ps, c.want, c.problem)
		})
	}
}

// Whole numbers are read exactly in every notation, including those that
// only a careful reader gets right.
func TestUint64Notations(t *testing.T) {
	cases := []struct {
		doc     string
		want    uint64
		problem string
	}{
		{"123.4500e2", 12345, ""},
		{"0.00012345e8", 12345, ""},
		{"1234500e-2", 12345, ""},
		{"1234501e-2", 0, "n: must be a whole number"},
		{"0.000", 0, ""},
		{"0e-5", 0, ""},
		{"1.8446744073709551615e19", math.MaxUint64, ""},
		{"1.8446744073709551616e19", 0, "n: is out of range (at most 18446744073709551615)"},
		{"1.5e400", 0, "n: is out of range (at most 18446744073709551615)"},
		{"1e-400", 0, "n: must be a whole number"},
		{"99999999999999999999", 0, "n: is out of range (at most 18446744073709551615)"},
	}
	for _, c := range cases {
		t.Run(c.doc, func(t *testing.T) {
			got, ok, ps := readNumber(t, c.doc, func(d *strictjson.Decoder, v *strictjson.Value) (any, bool) { return d.Uint64(v) })
			checkRead(t, got, ok, ps, c.want, c.problem)
		})
	}
}

// A Value built by hand may hold text that is not a number.
func TestNumberReadersRefuseMalformedText(t *testing.T) {
	for _, text := range []string{"", "-", "1.", ".5", "1e", "1e+", "0x10", "1 ", "NaN"} {
		v := &strictjson.Value{Kind: strictjson.Number, Number: json.Number(text)}
		d := strictjson.NewDecoder(nil)
		if _, ok := d.Uint64(v); ok && text != "" {
			t.Errorf("Uint64(%q) succeeded", text)
		}
		if _, ok := d.Int64(v); ok {
			t.Errorf("Int64(%q) succeeded", text)
		}
	}
}

// The whole-number readers make one pass over the digits and allocate
// nothing, whatever the length: 1.6 million digits (which Parse would
// refuse, but a Value built by hand may hold) cost no more per digit than
// 160 thousand. Allocation, not time, is asserted; BenchmarkLongNumbers
// shows the time.
func TestLongNumbersReadWithoutAllocating(t *testing.T) {
	for _, digits := range []int{160_000, 1_600_000} {
		for _, text := range []string{
			strings.Repeat("1", digits),
			strings.Repeat("1", digits) + ".0",
			"0." + strings.Repeat("0", digits) + "1e" + "1",
			"1" + strings.Repeat("0", digits) + "e-" + strings.Repeat("0", 5) + "1600000",
		} {
			v := &strictjson.Value{Kind: strictjson.Number, Number: json.Number(text)}
			d := strictjson.NewDecoder(nil)
			d.Uint64(v) // warm up: the problem is recorded once
			d.Int64(v)
			allocs := testing.AllocsPerRun(5, func() {
				d.Uint64(v)
				d.Int64(v)
			})
			// Each call records one problem (a string built for its
			// message), the same few allocations at any length.
			if allocs > 8 {
				t.Errorf("%d digits: %.0f allocations per read", digits, allocs)
			}
		}
	}
	v := &strictjson.Value{Kind: strictjson.Number, Number: json.Number("1" + strings.Repeat("0", 1_600_000) + "e-1599999")}
	if n, ok := strictjson.NewDecoder(nil).Uint64(v); !ok || n != 10 {
		t.Errorf("1 followed by 1.6 million zeros, e-1599999 = %d, %v; want 10", n, ok)
	}
}

func BenchmarkLongNumbers(b *testing.B) {
	for _, digits := range []int{1_600, 16_000, 160_000, 1_600_000} {
		v := &strictjson.Value{Kind: strictjson.Number, Number: json.Number(strings.Repeat("1", digits) + ".5")}
		d := strictjson.NewDecoder(nil)
		b.Run(strconv.Itoa(digits), func(b *testing.B) {
			b.SetBytes(int64(digits))
			for b.Loop() {
				d.Uint64(v)
			}
		})
	}
}

// toAny converts a parsed tree to what encoding/json decodes (with
// UseNumber).
func toAny(v *strictjson.Value) any {
	switch v.Kind {
	case strictjson.Null:
		return nil
	case strictjson.Bool:
		return v.Bool
	case strictjson.Number:
		return v.Number
	case strictjson.String:
		return v.String
	case strictjson.Array:
		out := make([]any, len(v.Items))
		for i, it := range v.Items {
			out[i] = toAny(it)
		}
		return out
	}
	out := make(map[string]any, len(v.Members))
	for _, m := range v.Members {
		out[m.Key] = toAny(m.Value)
	}
	return out
}

// agreesWithEncodingJSON checks Parse against encoding/json on one input:
// both accept it or both refuse it (but for the limits and for invalid
// UTF-8, which encoding/json accepts), and an accepted document without
// duplicate keys decodes to the same values.
func agreesWithEncodingJSON(t *testing.T, data []byte, v *strictjson.Value, ps strictjson.Problems) {
	t.Helper()
	valid := json.Valid(data)
	if v != nil && !valid {
		t.Fatalf("Parse accepted %q, which encoding/json refuses", data)
	}
	if v == nil && valid {
		last := ps[len(ps)-1].Message
		if !strings.HasPrefix(last, "nesting too deep") && !strings.HasPrefix(last, "number too long") &&
			last != "invalid JSON: not valid UTF-8" && last != strictjson.ErrTooLarge.Error() {
			t.Fatalf("Parse refused %q (%s), which encoding/json accepts", data, last)
		}
		return
	}
	if v == nil || len(ps) != 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	if got := toAny(v); !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q) = %#v; encoding/json has %#v", data, got, want)
	}
}

func TestParseAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{"a": [1, -2.5e+3, 0, -0, 1E-2, true, false, null, "s"], "b": {}, "c": []}`,
		`"\"\\\/\b\f\n\r\t\u00e9\u20ac\ud83d\ude00"`,
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"\ud800\"`,
		`"é✓😀"`, " \t\r\n[ 1 , 2 ]\n",
		`01`, `1.`, `.5`, `-`, `+1`, `1e`, `1e+`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `{,}`, `[01]`,
		`"\x"`, `"\u12"`, `"\u12G4"`, "\"\t\"", `tru`, `nul`, `falsey`, `[true false]`, `{"a":1 "b":2}`,
		`"abc`, `[`, `{`, `{"a"`, `{"a":`, `"\`, `"\u`,
	} {
		v, ps := strictjson.Parse([]byte(doc))
		agreesWithEncodingJSON(t, []byte(doc), v, ps)
	}
}
