package strictjson

import (
	"sort"
	"time"
)

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
