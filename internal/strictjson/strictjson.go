// Package strictjson decodes JSON documents strictly and reports every
// structural problem at once, each with its JSON path.
//
// # Design
//
// A document is first parsed into a small tree that keeps key order and
// remembers where each value sits (its path, such as
// `tenants[1].limits.max_queued_reservations`). Duplicate object keys are
// reported while parsing; the first occurrence is kept. Typed readers then
// walk the tree with an [Object] per JSON object: every read records a
// problem instead of failing fast (a missing key, a wrong type, a negative
// or fractional number, a value out of range), and [Object.Done] reports
// each key the reader never asked for as unknown. The caller ends with
// [Decoder.Err], a [Problems] value listing everything wrong with the file.
//
// Only a syntax error stops parsing early: after it nothing reliable can be
// said about the rest of the document.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Problem is one thing wrong with a document, at one JSON path.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Problems is every problem found in a document, in the order found. It is
// an error whose text has one line per problem.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// AsProblems returns the problems an error carries: the list itself for a
// Problems error, otherwise one problem without a path.
func AsProblems(err error) Problems {
	if err == nil {
		return nil
	}
	var ps Problems
	if errors.As(err, &ps) {
		return ps
	}
	return Problems{{Message: err.Error()}}
}

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	ObjectKind
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "a boolean"
	case Number:
		return "a number"
	case String:
		return "a string"
	case Array:
		return "an array"
	default:
		return "an object"
	}
}

// Member is one key of an object, in document order.
type Member struct {
	Key   string
	Value *Value
}

// Value is one parsed JSON value with its path.
type Value struct {
	Kind    Kind
	Path    string
	Bool    bool
	Number  json.Number
	String  string
	Items   []*Value
	Members []Member
}

// Parse parses one JSON document. Duplicate keys are returned as problems
// alongside the tree (the first occurrence wins); a syntax error returns a
// nil tree.
func Parse(data []byte) (*Value, Problems) {
	if !utf8.Valid(data) { // encoding/json would silently turn bad bytes into U+FFFD
		return nil, Problems{{Message: "invalid JSON: not valid UTF-8"}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &parser{dec: dec}
	v, err := p.value("")
	if err != nil {
		return nil, append(p.problems, Problem{Message: syntaxMessage(err, dec)})
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, append(p.problems, Problem{Message: "unexpected data after the top-level value"})
	}
	return v, p.problems
}

func syntaxMessage(err error, dec *json.Decoder) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: unexpected end of input"
	}
	return fmt.Sprintf("invalid JSON at byte %d: %v", dec.InputOffset(), err)
}

type parser struct {
	dec      *json.Decoder
	problems Problems
	depth    int
}

const maxDepth = 64

func (p *parser) value(path string) (*Value, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	return p.fromToken(tok, path)
}

func (p *parser) fromToken(tok json.Token, path string) (*Value, error) {
	switch t := tok.(type) {
	case nil:
		return &Value{Kind: Null, Path: path}, nil
	case bool:
		return &Value{Kind: Bool, Path: path, Bool: t}, nil
	case json.Number:
		return &Value{Kind: Number, Path: path, Number: t}, nil
	case string:
		return &Value{Kind: String, Path: path, String: t}, nil
	case json.Delim:
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > maxDepth {
			return nil, errors.New("nesting too deep")
		}
		if t == '[' {
			return p.array(path)
		}
		if t == '{' {
			return p.object(path)
		}
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

func (p *parser) array(path string) (*Value, error) {
	v := &Value{Kind: Array, Path: path}
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == ']' {
			return v, nil
		}
		item, err := p.fromToken(tok, fmt.Sprintf("%s[%d]", path, len(v.Items)))
		if err != nil {
			return nil, err
		}
		v.Items = append(v.Items, item)
	}
}

func (p *parser) object(path string) (*Value, error) {
	v := &Value{Kind: ObjectKind, Path: path}
	seen := map[string]bool{}
	for {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return v, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("object key is not a string")
		}
		child, err := p.value(JoinKey(path, key))
		if err != nil {
			return nil, err
		}
		if seen[key] {
			p.problems = append(p.problems, Problem{Path: JoinKey(path, key), Message: "duplicate key"})
			continue
		}
		seen[key] = true
		v.Members = append(v.Members, Member{Key: key, Value: child})
	}
}

// JoinKey appends an object key to a path.
func JoinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index appends an array index to a path.
func Index(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

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

// Bool reads a JSON boolean.
func (d *Decoder) Bool(v *Value) (bool, bool) {
	if v.Kind != Bool {
		d.Problemf(v.Path, "expected a boolean, got %s", v.Kind)
		return false, false
	}
	return v.Bool, true
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

// Object reads the keys of one JSON object.
type Object struct {
	d       *Decoder
	path    string
	members []Member
	used    map[string]bool
	broken  bool
}

// Path is the object's JSON path.
func (o *Object) Path() string { return o.path }

// Has reports whether the object holds key.
func (o *Object) Has(key string) bool {
	_, ok := o.lookup(key)
	return ok
}

func (o *Object) lookup(key string) (*Value, bool) {
	for _, m := range o.members {
		if m.Key == key {
			return m.Value, true
		}
	}
	return nil, false
}

// Get returns the value of a required key, recording "missing" if absent.
func (o *Object) Get(key string) (*Value, bool) {
	o.used[key] = true
	v, ok := o.lookup(key)
	if !ok {
		if !o.broken {
			o.d.Problemf(JoinKey(o.path, key), "missing")
		}
		return nil, false
	}
	return v, true
}

// Optional returns the value of an optional key; a JSON null counts as
// absent.
func (o *Object) Optional(key string) (*Value, bool) {
	o.used[key] = true
	v, ok := o.lookup(key)
	if !ok || v.Kind == Null {
		return nil, false
	}
	return v, true
}

// Done records every key that no reader asked for as unknown.
func (o *Object) Done() {
	var unknown []string
	for _, m := range o.members {
		if !o.used[m.Key] {
			unknown = append(unknown, m.Key)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		o.d.Problemf(JoinKey(o.path, k), "unknown key")
	}
}

// Convenience readers for required keys.

// String reads a required string key.
func (o *Object) String(key string) string {
	if v, ok := o.Get(key); ok {
		s, _ := o.d.String(v)
		return s
	}
	return ""
}

// Uint64 reads a required non-negative whole number.
func (o *Object) Uint64(key string) uint64 {
	if v, ok := o.Get(key); ok {
		n, _ := o.d.Uint64(v)
		return n
	}
	return 0
}

// Uint64Max reads a required non-negative whole number no greater than limit.
func (o *Object) Uint64Max(key string, limit uint64) uint64 {
	if v, ok := o.Get(key); ok {
		n, _ := o.d.Uint64Max(v, limit)
		return n
	}
	return 0
}

// OptionalUint64 reads an optional non-negative whole number.
func (o *Object) OptionalUint64(key string) (uint64, bool) {
	if v, ok := o.Optional(key); ok {
		return o.d.Uint64(v)
	}
	return 0, false
}

// Millis reads a required millisecond duration.
func (o *Object) Millis(key string) time.Duration {
	if v, ok := o.Get(key); ok {
		n, _ := o.d.Millis(v)
		return n
	}
	return 0
}

// OptionalMillis reads an optional millisecond duration.
func (o *Object) OptionalMillis(key string) (time.Duration, bool) {
	if v, ok := o.Optional(key); ok {
		return o.d.Millis(v)
	}
	return 0, false
}

// Float reads a required finite number.
func (o *Object) Float(key string) float64 {
	if v, ok := o.Get(key); ok {
		f, _ := o.d.Float(v)
		return f
	}
	return 0
}

// Strings reads a required array of strings.
func (o *Object) Strings(key string) []string {
	if v, ok := o.Get(key); ok {
		s, _ := o.d.Strings(v)
		return s
	}
	return nil
}

// Object opens a required nested object.
func (o *Object) Object(key string) *Object {
	v, ok := o.Get(key)
	if !ok {
		return &Object{d: o.d, path: JoinKey(o.path, key), used: map[string]bool{}, broken: true}
	}
	return o.d.Object(v)
}

// Array reads a required array.
func (o *Object) Array(key string) []*Value {
	if v, ok := o.Get(key); ok {
		items, _ := o.d.Array(v)
		return items
	}
	return nil
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

// Int64 reads a required signed whole number.
func (o *Object) Int64(key string) int64 {
	if v, ok := o.Get(key); ok {
		n, _ := o.d.Int64(v)
		return n
	}
	return 0
}

// OptionalInt64 reads an optional signed whole number.
func (o *Object) OptionalInt64(key string) (int64, bool) {
	if v, ok := o.Optional(key); ok {
		return o.d.Int64(v)
	}
	return 0, false
}

// OptionalObject opens an optional nested object; ok is false when the
// key is absent or null.
func (o *Object) OptionalObject(key string) (*Object, bool) {
	v, ok := o.Optional(key)
	if !ok {
		return nil, false
	}
	return o.d.Object(v), true
}

// Decoder returns the decoder the object reports to.
func (o *Object) Decoder() *Decoder { return o.d }
