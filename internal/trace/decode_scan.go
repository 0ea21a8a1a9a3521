package trace

import (
	"encoding/base64"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// The scanner of the recorded-line decoder (decode_recorded.go): the
// JSON tokens, strings, numbers and objects it takes, and the interner.

// interner keeps one copy of the short strings that repeat on every
// line (kinds, answers, tenants, routes), so decoding them allocates
// nothing after the first time: a direct-mapped cache on a hash of the
// bytes, which a string that does not repeat just passes through.
type interner struct {
	slots [1024]string
}

// maxInterned is the longest string interned: generated identifiers
// (revision and release IDs, 68 bytes) repeat on every line of a route.
const maxInterned = 96

func (in *interner) get(b []byte) string {
	if in == nil || len(b) > maxInterned {
		return string(b)
	}
	slot := &in.slots[xxhash.Sum64(b)&uint64(len(in.slots)-1)]
	if *slot != string(b) {
		*slot = string(b)
	}
	return *slot
}

type recordedDecoder struct {
	data []byte
	i    int
	ok   bool
	in   *interner
}

func (d *recordedDecoder) fail() { d.ok = false }

func (d *recordedDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c, reporting whether c was there.
func (d *recordedDecoder) consume(c byte) bool {
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// rawString returns a string's bytes without its quotes; plain printable
// ASCII only.
func (d *recordedDecoder) rawString() []byte {
	if !d.ok || !d.consume('"') {
		d.fail()
		return nil
	}
	start := d.i
	for d.i < len(d.data) && plainByte[d.data[d.i]] {
		d.i++
	}
	if d.i == len(d.data) || d.data[d.i] != '"' {
		d.fail() // an escape, a control or non-ASCII byte, or the end
		return nil
	}
	d.i++
	return d.data[start : d.i-1]
}

// plainByte is true for the bytes a string may hold as they are: printable
// ASCII but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (d *recordedDecoder) str() string {
	b := d.rawString()
	if !d.ok {
		return ""
	}
	return string(b)
}

func (d *recordedDecoder) istr() string {
	b := d.rawString()
	if !d.ok {
		return ""
	}
	return d.in.get(b)
}

func (d *recordedDecoder) bytes() []byte {
	d.ws()
	if d.null() {
		return nil
	}
	b := d.rawString()
	if !d.ok {
		return nil
	}
	out, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		d.fail()
	}
	return out
}

// null consumes a null literal, if one is next.
func (d *recordedDecoder) null() bool {
	d.ws()
	if len(d.data)-d.i >= 4 && string(d.data[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// number returns a JSON number's literal; integer says it has no
// fraction or exponent.
func (d *recordedDecoder) number() (lit []byte, integer bool) {
	d.ws()
	start, n := d.i, len(d.data)
	i := d.i
	if i < n && d.data[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < n && d.data[i] >= '0' && d.data[i] <= '9' {
			i++
		}
		return i - s
	}
	switch {
	case i < n && d.data[i] == '0':
		i++
	case digits() == 0:
		d.fail()
		return nil, false
	}
	integer = true
	if i < n && d.data[i] == '.' {
		i++
		integer = false
		if digits() == 0 {
			d.fail()
			return nil, false
		}
	}
	if i < n && (d.data[i] == 'e' || d.data[i] == 'E') {
		i++
		integer = false
		if i < n && (d.data[i] == '+' || d.data[i] == '-') {
			i++
		}
		if digits() == 0 {
			d.fail()
			return nil, false
		}
	}
	d.i = i
	return d.data[start:i], integer
}

func (d *recordedDecoder) int64() int64 {
	lit, integer := d.number()
	if !d.ok || !integer {
		d.fail()
		return 0
	}
	v, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		d.fail()
	}
	return v
}

func (d *recordedDecoder) uint64() uint64 {
	lit, integer := d.number()
	if !d.ok || !integer || (len(lit) > 0 && lit[0] == '-') {
		d.fail()
		return 0
	}
	v, err := strconv.ParseUint(string(lit), 10, 64)
	if err != nil {
		d.fail()
	}
	return v
}

func (d *recordedDecoder) uint32() uint32 {
	v := d.uint64()
	if v > 1<<32-1 {
		d.fail()
	}
	return uint32(v)
}

func (d *recordedDecoder) uint8() uint8 {
	v := d.uint64()
	if v > 1<<8-1 {
		d.fail()
	}
	return uint8(v)
}

func (d *recordedDecoder) float64() float64 {
	lit, _ := d.number()
	if !d.ok {
		return 0
	}
	v, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		d.fail()
	}
	return v
}

func (d *recordedDecoder) bool() bool {
	d.ws()
	switch {
	case len(d.data)-d.i >= 4 && string(d.data[d.i:d.i+4]) == "true":
		d.i += 4
		return true
	case len(d.data)-d.i >= 5 && string(d.data[d.i:d.i+5]) == "false":
		d.i += 5
		return false
	}
	d.fail()
	return false
}

func (d *recordedDecoder) optInt64() *int64 {
	if d.null() {
		return nil
	}
	v := d.int64()
	return &v
}

func (d *recordedDecoder) int64s() []int64 {
	if d.null() {
		return nil
	}
	if !d.consume('[') {
		d.fail()
		return nil
	}
	out := []int64{}
	if d.consume(']') {
		return out
	}
	for d.ok {
		out = append(out, d.int64())
		if d.consume(']') {
			return out
		}
		if !d.consume(',') {
			d.fail()
		}
	}
	return nil
}

// object reads an object's members, calling field for each key; field
// reads the value. An object may be null when nullable.
func (d *recordedDecoder) object(field func(key []byte)) {
	if !d.consume('{') {
		d.fail()
		return
	}
	if d.consume('}') {
		return
	}
	for d.ok {
		key := d.rawString()
		if !d.ok || !d.consume(':') {
			d.fail()
			return
		}
		field(key)
		if d.consume('}') {
			return
		}
		if !d.consume(',') {
			d.fail()
		}
	}
}
