package strictjson

import (
	"sort"
	"time"
)

// Object reads the keys of one JSON object.
type Object struct {
	d *Decoder
	// Where the object is: its value, or, for a key that was missing, the
	// object holding it and the key. The path is built only on demand.
	value  *Value
	parent *Object
	key    string

	members []Member
	used    []bool // parallel to members: asked for by a reader
	broken  bool
}

// Path is the object's JSON path.
func (o *Object) Path() string {
	switch {
	case o.value != nil:
		return o.value.Path()
	case o.parent != nil:
		return JoinKey(o.parent.Path(), o.key)
	}
	return ""
}

// Has reports whether the object holds key.
func (o *Object) Has(key string) bool {
	return o.lookup(key) >= 0
}

func (o *Object) lookup(key string) int {
	for i, m := range o.members {
		if m.Key == key {
			return i
		}
	}
	return -1
}

// Get returns the value of a required key, recording "missing" if absent.
func (o *Object) Get(key string) (*Value, bool) {
	i := o.lookup(key)
	if i < 0 {
		if !o.broken {
			o.problem(key, "missing")
		}
		return nil, false
	}
	o.used[i] = true
	return o.members[i].Value, true
}

// problem records a problem at one of the object's keys.
func (o *Object) problem(key, message string) {
	if !o.d.problems.room() {
		o.d.problems.truncated = true
		return
	}
	o.d.problems.add(Problem{Path: JoinKey(o.Path(), key), Message: message})
}

// Optional returns the value of an optional key; a JSON null counts as
// absent.
func (o *Object) Optional(key string) (*Value, bool) {
	i := o.lookup(key)
	if i < 0 {
		return nil, false
	}
	o.used[i] = true
	if v := o.members[i].Value; v.Kind != Null {
		return v, true
	}
	return nil, false
}

// Done records every key that no reader asked for as unknown, in key
// order.
func (o *Object) Done() {
	var unknown []string
	for i, m := range o.members {
		if !o.used[i] {
			unknown = append(unknown, m.Key)
		}
	}
	if len(unknown) == 0 {
		return
	}
	sort.Strings(unknown)
	path := o.Path()
	for _, k := range unknown {
		if !o.d.problems.room() {
			o.d.problems.truncated = true
			return
		}
		o.d.problems.add(Problem{Path: JoinKey(path, k), Message: "unknown key"})
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
		return &Object{d: o.d, parent: o, key: key, broken: true}
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

// OptionalBool reads an optional boolean: false when the key is absent.
func (o *Object) OptionalBool(key string) bool {
	if v, ok := o.Optional(key); ok {
		b, _ := o.d.Bool(v)
		return b
	}
	return false
}
