package trace

import (
	"encoding/base64"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// The fast decoder. encoding/json's reflection costs several
// microseconds a line, most of a replay's time; a trace's lines as the
// recorder writes them (exact keys, plain ASCII strings, no escapes) are
// decoded here by hand instead. It accepts a subset of what
// encoding/json accepts and builds the same Line; anything else (an
// escape, a key in another case, an unknown key, a type it does not
// expect) makes it give up, and DecodeLine decodes the line again with
// encoding/json, whose answer (and error message) stands.

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

type fastDecoder struct {
	data []byte
	i    int
	ok   bool
	in   *interner
}

func (d *fastDecoder) fail() { d.ok = false }

func (d *fastDecoder) ws() {
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
func (d *fastDecoder) consume(c byte) bool {
	d.ws()
	if d.i < len(d.data) && d.data[d.i] == c {
		d.i++
		return true
	}
	return false
}

// rawString returns a string's bytes without its quotes; plain printable
// ASCII only.
func (d *fastDecoder) rawString() []byte {
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

func (d *fastDecoder) str() string {
	b := d.rawString()
	if !d.ok {
		return ""
	}
	return string(b)
}

func (d *fastDecoder) istr() string {
	b := d.rawString()
	if !d.ok {
		return ""
	}
	return d.in.get(b)
}

func (d *fastDecoder) bytes() []byte {
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
func (d *fastDecoder) null() bool {
	d.ws()
	if len(d.data)-d.i >= 4 && string(d.data[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// number returns a JSON number's literal; integer says it has no
// fraction or exponent.
func (d *fastDecoder) number() (lit []byte, integer bool) {
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

func (d *fastDecoder) int64() int64 {
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

func (d *fastDecoder) uint64() uint64 {
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

func (d *fastDecoder) uint32() uint32 {
	v := d.uint64()
	if v > 1<<32-1 {
		d.fail()
	}
	return uint32(v)
}

func (d *fastDecoder) float64() float64 {
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

func (d *fastDecoder) bool() bool {
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

func (d *fastDecoder) optInt64() *int64 {
	if d.null() {
		return nil
	}
	v := d.int64()
	return &v
}

func (d *fastDecoder) int64s() []int64 {
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
func (d *fastDecoder) object(field func(key []byte)) {
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

func (d *fastDecoder) line(line *Line) {
	l := &decodingLine{Line: line}
	d.object(func(key []byte) {
		switch string(key) {
		case "k":
			l.Kind = d.istr()
		case "order":
			l.Order = d.uint64()
		case "t":
			l.T = d.int64()
		// Header
		case "version":
			l.header().Version = int(d.int64())
		case "start_unix_ns":
			l.header().StartUnixNano = d.int64()
		case "file":
			l.header().File = d.uint64()
		case "policy_sha256":
			l.header().PolicySHA256 = d.str()
		// Catalog
		case "catalog_generation":
			l.catalog().Generation = d.uint64()
		case "catalog_json":
			l.catalog().File = d.bytes()
		case "catalog_part":
			l.catalog().Part = d.uint32()
		case "catalog_parts":
			l.catalog().Parts = d.uint32()
		// Change
		case "generation":
			l.change().Generation = d.uint64()
		case "deployment_json":
			l.change().Deployment = d.bytes()
		case "deployment_part":
			l.change().DeploymentPart = d.uint32()
		case "deployment_parts":
			l.change().DeploymentParts = d.uint32()
		case "tenant":
			l.change().Tenant = d.istr()
		case "service":
			l.change().Service = d.istr()
		// Load
		case "sequence":
			l.load().Sequence = d.uint64()
		case "observed_t":
			l.load().ObservedT = d.int64()
		case "cpu_pressure":
			l.load().CPUPressure = d.float64()
		case "memory_pressure":
			l.load().MemoryPressure = d.float64()
		case "queue_delay_ns":
			l.load().QueueDelayNS = d.int64s()
		// Decision
		case "stage":
			l.decision().Stage = d.istr()
		case "principal":
			dec := l.decision()
			if d.null() {
				dec.Principal = nil
				return
			}
			if dec.Principal == nil {
				// As encoding/json does for a nil pointer: a new zero
				// value, never the fields of an earlier object that a
				// null since replaced.
				l.block.principal = Principal{}
				dec.Principal = &l.block.principal
			}
			d.principal(dec.Principal)
		case "target":
			d.target(&l.decision().Target)
		case "routing_key":
			l.decision().RoutingKey = d.str()
		case "revision":
			dec := l.decision()
			if d.null() {
				dec.Revision = nil
				return
			}
			if dec.Revision == nil {
				l.block.revision = Revision{}
				dec.Revision = &l.block.revision
			}
			d.revision(dec.Revision)
		case "pin_generation":
			l.decision().Generation = d.uint64()
		case "activation_id":
			l.decision().ActivationID = d.str()
		case "priority":
			l.decision().Priority = d.uint32()
		case "budget":
			d.budget(&l.decision().Budget)
		case "payload_bytes":
			l.decision().PayloadBytes = d.uint64()
		case "deadline_unix_ms":
			l.decision().DeadlineUnixMS = d.optInt64()
		case "clock":
			l.decision().Clock = d.bool()
		case "committed":
			l.decision().Committed = d.bool()
		case "since_ns":
			l.decision().Since = d.int64s()
		case "load":
			l.decision().LoadSequence = d.uint64()
		case "commit_load":
			l.decision().CommitLoadSequence = d.uint64()
		case "answer":
			l.decision().Answer = d.istr()
		case "scope":
			l.decision().Scope = d.istr()
		case "dimension":
			l.decision().Dimension = d.istr()
		// Move
		case "of":
			l.move().Of = d.uint64()
		case "elapsed_ns":
			l.move().ElapsedNS = d.int64()
		case "refused":
			l.move().Refused = d.bool()
		case "reclaimed":
			l.move().Reclaimed = d.bool()
		// Dropped
		case "dropped_lines":
			l.dropped().Lines = d.uint64()
		default:
			d.fail()
		}
	})
}

func (d *fastDecoder) principal(p *Principal) {
	d.object(func(key []byte) {
		switch string(key) {
		case "kind":
			p.Kind = d.istr()
		case "subject":
			p.Subject = d.istr()
		case "tenant":
			p.Tenant = d.istr()
		case "service":
			p.Service = d.istr()
		case "admin":
			p.Admin = d.bool()
		default:
			d.fail()
		}
	})
}

func (d *fastDecoder) target(t *Target) {
	d.object(func(key []byte) {
		switch string(key) {
		case "tenant":
			t.Tenant = d.istr()
		case "service":
			t.Service = d.istr()
		case "route":
			t.Route = d.istr()
		default:
			d.fail()
		}
	})
}

func (d *fastDecoder) revision(r *Revision) {
	d.object(func(key []byte) {
		switch string(key) {
		case "tenant":
			r.Tenant = d.istr()
		case "service":
			r.Service = d.istr()
		case "route":
			r.Route = d.istr()
		case "contract":
			r.Contract = d.istr()
		case "function":
			r.Function = d.istr()
		case "revision":
			r.Revision = d.istr()
		case "release":
			r.Release = d.istr()
		default:
			d.fail()
		}
	})
}

func (d *fastDecoder) budget(b *Budget) {
	d.object(func(key []byte) {
		switch string(key) {
		case "cpu_fuel":
			b.CPUFuel = d.uint64()
		case "memory_bytes":
			b.MemoryBytes = d.uint64()
		case "wall_time_ns":
			b.WallTimeNS = d.optInt64()
		default:
			d.fail()
		}
	})
}

func (l *Line) header() *Header {
	if l.Header == nil {
		l.Header = new(Header)
	}
	return l.Header
}

func (l *Line) catalog() *Catalog {
	if l.Catalog == nil {
		l.Catalog = new(Catalog)
	}
	return l.Catalog
}

func (l *Line) change() *Change {
	if l.Change == nil {
		l.Change = new(Change)
	}
	return l.Change
}

func (l *Line) load() *Load {
	if l.Load == nil {
		l.Load = new(Load)
	}
	return l.Load
}

// decisionBlock is a decision line's parts in one allocation.
type decisionBlock struct {
	decision  Decision
	principal Principal
	revision  Revision
}

// decodingLine is a Line being decoded: the line, and the block its
// decision's parts are taken from, allocated when the line is one.
type decodingLine struct {
	*Line
	block *decisionBlock
}

func (l *decodingLine) decision() *Decision {
	if l.Decision == nil {
		l.block = new(decisionBlock)
		l.Decision = &l.block.decision
	}
	return l.Decision
}

func (l *Line) move() *Move {
	if l.Move == nil {
		l.Move = new(Move)
	}
	return l.Move
}

func (l *Line) dropped() *Dropped {
	if l.Dropped == nil {
		l.Dropped = new(Dropped)
	}
	return l.Dropped
}

// decodeFast decodes data into l (reset first) and reports whether it
// could; when it could not, l is to be decoded again.
func decodeFast(data []byte, l *Line, in *interner) bool {
	*l = Line{}
	d := fastDecoder{data: data, ok: true, in: in}
	d.line(l)
	d.ws()
	return d.ok && d.i == len(d.data)
}
