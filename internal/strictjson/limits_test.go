package strictjson_test

import (
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"latent.dev/admission/internal/strictjson"
)

// allocatedBytes is how many bytes f allocates, garbage included.
func allocatedBytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// walk reads a whole tree the way a typed reader does: every object is
// opened and closed (so each key is reported as unknown), and every other
// value is read as a whole number (so each one that is not becomes a
// problem, with its path).
func walk(d *strictjson.Decoder, v *strictjson.Value) {
	switch v.Kind {
	case strictjson.ObjectKind:
		d.Object(v) // not closed: its members are walked instead
		for _, m := range v.Members {
			walk(d, m.Value)
		}
	case strictjson.Array:
		for _, it := range v.Items {
			walk(d, it)
		}
	default:
		d.Uint64(v)
	}
}

// bytesPerInputByte parses and walks a document, printing its problems,
// and returns how many bytes that allocated per input byte.
func bytesPerInputByte(doc string) float64 {
	data := []byte(doc)
	n := allocatedBytes(func() {
		v, ps := strictjson.Parse(data)
		d := strictjson.NewDecoder(ps)
		if v != nil {
			walk(d, v)
		}
		for _, p := range d.Problems() {
			_ = p.String()
		}
	})
	return float64(n) / float64(len(data))
}

// Decoding costs memory in proportion to the input, whatever its shape:
// the bytes allocated per input byte do not grow when the input grows
// tenfold. The shapes are those that were quadratic when every value
// stored its full path: a long key above many values, and problems under a
// long key.
func TestDecodingAllocatesLinearly(t *testing.T) {
	shapes := []struct {
		name string
		doc  func(n int) string
	}{
		{"a long key above a large array", func(n int) string {
			return `{"` + strings.Repeat("k", n) + `": [` + strings.Repeat("0,", n) + `0]}`
		}},
		{"a problem for every item under a long key", func(n int) string {
			return `{"` + strings.Repeat("k", n) + `": [` + strings.Repeat(`"x",`, n) + `"x"]}`
		}},
		{"duplicate keys under a long key", func(n int) string {
			return `{"` + strings.Repeat("k", n) + `": [` + strings.Repeat(`{"a":0,"a":0},`, n) + `{}]}`
		}},
		{"deep nesting of long keys", func(n int) string {
			key := `"` + strings.Repeat(`\u0001`, n/64) + `":`
			return strings.Repeat("{"+key, 63) + "[" + strings.Repeat(`"x",`, n) + `"x"]` + strings.Repeat("}", 63)
		}},
		{"long numbers", func(n int) string {
			number := strings.Repeat("7", strictjson.MaxNumberDigits-2) + ".0"
			return "[" + strings.Repeat(number+",", n/100) + "0]"
		}},
		{"long strings", func(n int) string {
			return `["` + strings.Repeat(`a\n`, n) + `"]`
		}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			small := bytesPerInputByte(s.doc(20_000))
			large := bytesPerInputByte(s.doc(200_000))
			t.Logf("%.1f bytes allocated per input byte at 20,000, %.1f at 200,000", small, large)
			if large > 1.25*small+2 {
				t.Errorf("allocation grows with the input: %.1f bytes per input byte at 20,000, %.1f at 200,000", small, large)
			}
			if large > 80 {
				t.Errorf("%.1f bytes allocated per input byte; want at most 80", large)
			}
		})
	}
}

// A number too long to accept is refused after one pass over its digits:
// the cost does not grow with its length beyond the one copy of the input.
func TestLongNumbersAreRefusedInLinearTime(t *testing.T) {
	per := func(digits int) float64 {
		return bytesPerInputByte(`{"n": ` + strings.Repeat("1", digits) + `.5}`)
	}
	small, large := per(160_000), per(1_600_000)
	t.Logf("%.2f bytes allocated per input byte at 160,000 digits, %.2f at 1,600,000", small, large)
	if large > 1.25*small+0.5 || large > 3 {
		t.Errorf("refusing a long number allocates %.2f bytes per input byte at 160,000 digits, %.2f at 1,600,000", small, large)
	}
}

func TestInputSizeLimit(t *testing.T) {
	t.Run("a document of exactly the limit parses", func(t *testing.T) {
		doc := make([]byte, strictjson.MaxDocumentBytes)
		for i := range doc {
			doc[i] = ' '
		}
		doc[0], doc[1] = '{', '}'
		if v, ps := strictjson.Parse(doc); v == nil || len(ps) != 0 {
			t.Fatalf("Parse = %v, %q", v, ps)
		}
	})
	t.Run("one byte more is refused before parsing", func(t *testing.T) {
		doc := make([]byte, strictjson.MaxDocumentBytes+1)
		v, ps := strictjson.Parse(doc)
		assertProblems(t, ps, "input exceeds 8388608 bytes")
		if v != nil {
			t.Error("Parse returned a tree")
		}
	})
}

// endless is an input that never ends, as /dev/zero.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	e.read += int64(len(p))
	return len(p), nil
}

func TestReadAll(t *testing.T) {
	t.Run("an endless input stops one byte after the limit", func(t *testing.T) {
		in := &endless{}
		data, err := strictjson.ReadAll(in)
		if !errors.Is(err, strictjson.ErrTooLarge) || data != nil {
			t.Fatalf("ReadAll = %d bytes, %v; want ErrTooLarge", len(data), err)
		}
		if err.Error() != "input exceeds 8388608 bytes" {
			t.Errorf("error text %q", err)
		}
		if in.read > strictjson.MaxDocumentBytes+64<<10 {
			t.Errorf("read %d bytes of an endless input", in.read)
		}
	})
	t.Run("an input of exactly the limit is read whole", func(t *testing.T) {
		data, err := strictjson.ReadAll(io.LimitReader(&endless{}, strictjson.MaxDocumentBytes))
		if err != nil || len(data) != strictjson.MaxDocumentBytes {
			t.Fatalf("ReadAll = %d bytes, %v", len(data), err)
		}
	})
	t.Run("a read error is returned", func(t *testing.T) {
		broken := errors.New("disk on fire")
		if _, err := strictjson.ReadAll(io.MultiReader(strings.NewReader("{"), errReader{broken})); !errors.Is(err, broken) {
			t.Fatalf("ReadAll error = %v", err)
		}
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestNumberDigitLimit(t *testing.T) {
	digits := func(n int) string { return strings.Repeat("1", n) }
	for _, c := range []struct {
		name    string
		number  string
		problem string // empty: accepted
	}{
		{"exactly the limit", digits(strictjson.MaxNumberDigits), ""},
		{"exactly the limit with a fraction and an exponent", "-" + digits(200) + "." + digits(50) + "e+" + digits(6), ""},
		{"one digit more", digits(strictjson.MaxNumberDigits + 1),
			"tenants[0].n: number too long at byte 19: 257 digits, more than 256"},
		{"one fraction digit more", "0." + digits(strictjson.MaxNumberDigits),
			"tenants[0].n: number too long at byte 19: 257 digits, more than 256"},
		{"one exponent digit more", "1e" + digits(strictjson.MaxNumberDigits),
			"tenants[0].n: number too long at byte 19: 257 digits, more than 256"},
		{"1.6 million digits", digits(1_600_000),
			"tenants[0].n: number too long at byte 19: 1600000 digits, more than 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, ps := strictjson.Parse([]byte(`{"tenants": [{"n": ` + c.number + `}]}`))
			if c.problem == "" {
				if v == nil || len(ps) != 0 {
					t.Fatalf("Parse = %v, %q", v, ps)
				}
				return
			}
			if v != nil {
				t.Error("Parse returned a tree")
			}
			assertProblems(t, ps, c.problem)
		})
	}
}

func TestDepthLimitNamesThePath(t *testing.T) {
	doc := strings.Repeat(`{"k":`, strictjson.MaxDepth) + "[1]" + strings.Repeat("}", strictjson.MaxDepth)
	_, ps := strictjson.Parse([]byte(doc))
	want := strings.TrimPrefix(strings.Repeat(".k", strictjson.MaxDepth), ".") +
		": nesting too deep at byte " + strconv.Itoa(5*strictjson.MaxDepth) + ": more than 64 levels of arrays and objects"
	assertProblems(t, ps, want)
}

// A document with more problems than MaxProblems lists the first ones and
// says that it stopped.
func TestProblemsAreCapped(t *testing.T) {
	doc := `{"list": [` + strings.Repeat(`{"a":0,"a":0},`, 1500) + `{}]}`
	v, ps := strictjson.Parse([]byte(doc))
	if v == nil {
		t.Fatal("Parse returned no tree")
	}
	if len(ps) != strictjson.MaxProblems+1 || ps[0].String() != "list[0].a: duplicate key" ||
		ps[len(ps)-1].String() != "too many problems: only the first 1000 are listed" {
		t.Fatalf("%d problems, first %q, last %q", len(ps), ps[0], ps[len(ps)-1])
	}
	d := strictjson.NewDecoder(ps)
	d.Problemf("x", "one more")
	walk(d, v)
	if got := d.Problems(); len(got) != strictjson.MaxProblems+1 || got[len(got)-1] != ps[len(ps)-1] {
		t.Fatalf("the decoder holds %d problems, last %q", len(got), got[len(got)-1])
	}
	// Merging capped problems into another decoder keeps one final line.
	merged := strictjson.NewDecoder(nil)
	for _, p := range ps {
		merged.Problemf(p.Path, "%s", p.Message)
	}
	if got := merged.Problems(); len(got) != strictjson.MaxProblems+1 {
		t.Fatalf("merged: %d problems", len(got))
	}
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		doc := []byte(`{"` + strings.Repeat("k", n) + `": [` + strings.Repeat(`{"a": 12345.0, "b": "x\n"},`, n/25) + `0]}`)
		b.Run(strconv.Itoa(len(doc)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				strictjson.Parse(doc)
			}
		})
	}
}
