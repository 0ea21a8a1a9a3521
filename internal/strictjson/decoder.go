package strictjson

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Decoder collects problems while typed readers walk a parsed document. It
// keeps at most MaxProblems of them.
type Decoder struct {
	problems problemList
}

// NewDecoder returns a decoder that starts with the given problems (those
// Parse returned, typically).
func NewDecoder(initial Problems) *Decoder {
	d := &Decoder{}
	for _, p := range initial {
		d.problems.add(p)
	}
	return d
}

// Problemf records a problem at a path.
func (d *Decoder) Problemf(path, format string, args ...any) {
	if !d.problems.room() {
		d.problems.truncated = true
		return
	}
	d.problems.add(Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// ProblemAt records a problem at v's path. Unlike Problemf with v.Path(),
// it builds the path only if the problem is kept.
func (d *Decoder) ProblemAt(v *Value, format string, args ...any) {
	if !d.problems.room() {
		d.problems.truncated = true
		return
	}
	d.problems.add(Problem{Path: v.Path(), Message: fmt.Sprintf(format, args...)})
}

// Problems returns what has been recorded so far.
func (d *Decoder) Problems() Problems { return d.problems.list() }

// Err returns the recorded problems as an error, or nil when there are none.
func (d *Decoder) Err() error {
	if ps := d.problems.list(); len(ps) > 0 {
		return ps
	}
	return nil
}

// Object opens a JSON object for reading. A value of another type records a
// problem and returns an object that reads as if every key were missing but
// reports nothing further.
func (d *Decoder) Object(v *Value) *Object {
	o := &Object{d: d, value: v}
	if v.Kind != ObjectKind {
		d.ProblemAt(v, "expected an object, got %s", v.Kind)
		o.broken = true
		return o
	}
	o.members = v.Members
	o.used = make([]bool, len(v.Members))
	return o
}

// Array returns the items of a JSON array, or records a problem.
func (d *Decoder) Array(v *Value) ([]*Value, bool) {
	if v.Kind != Array {
		d.ProblemAt(v, "expected an array, got %s", v.Kind)
		return nil, false
	}
	return v.Items, true
}

// String reads a JSON string.
func (d *Decoder) String(v *Value) (string, bool) {
	if v.Kind != String {
		d.ProblemAt(v, "expected a string, got %s", v.Kind)
		return "", false
	}
	return v.String, true
}

var maxUint64Text = strconv.FormatUint(math.MaxUint64, 10)

// Uint64 reads a whole, non-negative number that fits 64 bits. Every
// notation is read exactly: 1e3 and 1000.0 are 1000, 15e-1 is not whole.
func (d *Decoder) Uint64(v *Value) (uint64, bool) {
	if v.Kind != Number {
		d.ProblemAt(v, "expected a non-negative whole number, got %s", v.Kind)
		return 0, false
	}
	if strings.HasPrefix(string(v.Number), "-") {
		d.ProblemAt(v, "must not be negative")
		return 0, false
	}
	_, n, res := wholeMagnitude(string(v.Number))
	switch res {
	case notWhole:
		d.ProblemAt(v, "must be a whole number")
	case tooLarge:
		d.ProblemAt(v, "is out of range (at most %s)", maxUint64Text)
	case notANumber:
		d.ProblemAt(v, "is not a valid number")
	default:
		return n, true
	}
	return 0, false
}

// Uint64Max reads a whole, non-negative number no greater than limit.
func (d *Decoder) Uint64Max(v *Value, limit uint64) (uint64, bool) {
	n, ok := d.Uint64(v)
	if ok && n > limit {
		d.ProblemAt(v, "is out of range (at most %d)", limit)
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
		d.ProblemAt(v, "does not fit a duration (at most %d milliseconds)", maxMillis)
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// Float reads a finite JSON number.
func (d *Decoder) Float(v *Value) (float64, bool) {
	if v.Kind != Number {
		d.ProblemAt(v, "expected a number, got %s", v.Kind)
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v.Number), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.ProblemAt(v, "is not a finite number")
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
		d.ProblemAt(v, "expected an object, got %s", v.Kind)
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
		d.ProblemAt(v, "expected a whole number, got %s", v.Kind)
		return 0, false
	}
	neg, n, res := wholeMagnitude(string(v.Number))
	switch {
	case res == notWhole:
		d.ProblemAt(v, "must be a whole number")
	case res == notANumber:
		d.ProblemAt(v, "is not a valid number")
	case res == tooLarge, !neg && n > math.MaxInt64, neg && n > 1<<63:
		d.ProblemAt(v, "is out of range")
	case neg:
		return int64(-n), true // -(1<<63) wraps to itself, as it should
	default:
		return int64(n), true
	}
	return 0, false
}

// Bool reads true or false.
func (d *Decoder) Bool(v *Value) (bool, bool) {
	if v.Kind != Bool {
		d.ProblemAt(v, "expected true or false, got %s", v.Kind)
		return false, false
	}
	return v.Bool, true
}
