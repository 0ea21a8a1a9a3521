package strictjson

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// Decoder collects problems while typed readers walk a parsed document.
type Decoder struct {
	problems Problems
}

// NewDecoder returns a decoder that starts with the given problems (those
// Parse returned, typically).
func NewDecoder(initial Problems) *Decoder {
	return &Decoder{problems: append(Problems(nil), initial...)}
}

// Problemf records a problem at a path.
func (d *Decoder) Problemf(path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Problems returns what has been recorded so far.
func (d *Decoder) Problems() Problems { return d.problems }

// Err returns the recorded problems as an error, or nil when there are none.
func (d *Decoder) Err() error {
	if len(d.problems) == 0 {
		return nil
	}
	return d.problems
}

// Object opens a JSON object for reading. A value of another type records a
// problem and returns an object that reads as if every key were missing but
// reports nothing further.
func (d *Decoder) Object(v *Value) *Object {
	o := &Object{d: d, path: v.Path, used: map[string]bool{}}
	if v.Kind != ObjectKind {
		d.Problemf(v.Path, "expected an object, got %s", v.Kind)
		o.broken = true
		return o
	}
	o.members = v.Members
	return o
}

// Array returns the items of a JSON array, or records a problem.
func (d *Decoder) Array(v *Value) ([]*Value, bool) {
	if v.Kind != Array {
		d.Problemf(v.Path, "expected an array, got %s", v.Kind)
		return nil, false
	}
	return v.Items, true
}

// String reads a JSON string.
func (d *Decoder) String(v *Value) (string, bool) {
	if v.Kind != String {
		d.Problemf(v.Path, "expected a string, got %s", v.Kind)
		return "", false
	}
	return v.String, true
}

// Uint64 reads a whole, non-negative number that fits 64 bits.
func (d *Decoder) Uint64(v *Value) (uint64, bool) {
	if v.Kind != Number {
		d.Problemf(v.Path, "expected a non-negative whole number, got %s", v.Kind)
		return 0, false
	}
	s := string(v.Number)
	if strings.HasPrefix(s, "-") {
		d.Problemf(v.Path, "must not be negative")
		return 0, false
	}
	if strings.ContainsAny(s, ".eE") {
		// Exact rational arithmetic, so 9007199254740993.0 stays exact and
		// 1e20 is out of range rather than "not whole". Exponents are
		// bounded first: SetString would expand 1e999999999 in full.
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || exp > 400 || exp < -400 {
				d.Problemf(v.Path, "is out of range (at most %d)", uint64(math.MaxUint64))
				return 0, false
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok || !r.IsInt() {
			d.Problemf(v.Path, "must be a whole number")
			return 0, false
		}
		if !r.Num().IsUint64() {
			d.Problemf(v.Path, "is out of range (at most %d)", uint64(math.MaxUint64))
			return 0, false
		}
		return r.Num().Uint64(), true
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		d.Problemf(v.Path, "is out of range (at most %d)", uint64(math.MaxUint64))
		return 0, false
	}
	return n, true
}

// Uint64Max reads a whole, non-negative number no greater than limit.
func (d *Decoder) Uint64Max(v *Value, limit uint64) (uint64, bool) {
	n, ok := d.Uint64(v)
	if ok && n > limit {
		d.Problemf(v.Path, "is out of range (at most %d)", limit)
		return 0, false
	}
	return n, ok
}

// maxMillis is the largest whole number of milliseconds a time.Duration holds.
const maxMillis = uint64(math.MaxInt64 / int64(time.Millisecond))

// Millis reads a whole number of milliseconds that fits a time.Duration.
func (d *Decoder) Millis(v *Value) (time.Duration, bool) {
	n, ok := d.Uint64(v)
	if !ok {
		return 0, false
	}
	if n > maxMillis {
		d.Problemf(v.Path, "does not fit a duration (at most %d milliseconds)", maxMillis)
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// Float reads a finite JSON number.
func (d *Decoder) Float(v *Value) (float64, bool) {
	if v.Kind != Number {
		d.Problemf(v.Path, "expected a number, got %s", v.Kind)
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.Number), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.Problemf(v.Path, "is not a finite number")
		return 0, false
	}
	return f, true
}

// Strings reads an array of strings.
func (d *Decoder) Strings(v *Value) ([]string, bool) {
	items, ok := d.Array(v)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	good := true
	for _, it := range items {
		s, ok := d.String(it)
		good = good && ok
		out = append(out, s)
	}
	return out, good
}

// StringMap reads an object whose values are all strings.
func (d *Decoder) StringMap(v *Value) (map[string]string, bool) {
	if v.Kind != ObjectKind {
		d.Problemf(v.Path, "expected an object, got %s", v.Kind)
		return nil, false
	}
	out := make(map[string]string, len(v.Members))
	good := true
	for _, m := range v.Members {
		s, ok := d.String(m.Value)
		good = good && ok
		out[m.Key] = s
	}
	return out, good
}

// Int64 reads a whole number that fits a signed 64-bit integer.
func (d *Decoder) Int64(v *Value) (int64, bool) {
	if v.Kind != Number {
		d.Problemf(v.Path, "expected a whole number, got %s", v.Kind)
		return 0, false
	}
	s := string(v.Number)
	if strings.ContainsAny(s, ".eE") {
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || exp > 400 || exp < -400 {
				d.Problemf(v.Path, "is out of range")
				return 0, false
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok || !r.IsInt() {
			d.Problemf(v.Path, "must be a whole number")
			return 0, false
		}
		if !r.Num().IsInt64() {
			d.Problemf(v.Path, "is out of range")
			return 0, false
		}
		return r.Num().Int64(), true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		d.Problemf(v.Path, "is out of range")
		return 0, false
	}
	return n, true
}
