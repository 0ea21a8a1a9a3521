package strictjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

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

// Value is one parsed JSON value. It knows where it sits in the document
// through its parent, so its path is built only when asked for ([Value.Path]).
type Value struct {
	Kind    Kind
	Bool    bool
	index   int32 // position in the parent array
	Number  json.Number
	String  string
	Items   []*Value
	Members []Member
	parent  *Value
	key     string // key in the parent object
}

// Parse parses one JSON document. Duplicate keys are returned as problems
// alongside the tree (the first occurrence wins). A syntax error, or a
// document beyond the limits in the package documentation, returns a nil
// tree. Time and memory are linear in len(data).
func Parse(data []byte) (*Value, Problems) {
	if len(data) > MaxDocumentBytes {
		return nil, Problems{{Message: ErrTooLarge.Error()}}
	}
	if !utf8.Valid(data) {
		return nil, Problems{{Message: "invalid JSON: not valid UTF-8"}}
	}
	// One copy of the input: every key, string and number without escapes
	// is a slice of it.
	p := &parser{src: string(data)}
	v := p.value(nil, "", 0)
	if v != nil {
		p.skipSpace()
		if p.pos < len(p.src) {
			p.fatal = &Problem{Message: "unexpected data after the top-level value"}
			v = nil
		}
	}
	problems := p.problems.list()
	if v == nil {
		return nil, append(problems, *p.fatal)
	}
	return v, problems
}

// parser is a recursive-descent JSON parser over one string. Recursion is
// bounded by MaxDepth. After the first fatal problem every method returns
// nil at once.
type parser struct {
	src      string
	pos      int
	depth    int
	problems problemList
	fatal    *Problem

	// Children are gathered on shared stacks and copied out once their
	// container closes, so each Items or Members slice is allocated once at
	// its final size.
	items   []*Value
	members []Member
	slab    []Value // values are carved from slabs to save allocations
	scratch []byte  // for strings with escapes
}

func (p *parser) newValue(parent *Value, key string, index int) *Value {
	if len(p.slab) == 0 {
		n := 2 * cap(p.slab)
		if n < 16 {
			n = 16
		} else if n > 1024 {
			n = 1024
		}
		p.slab = make([]Value, n)
	}
	v := &p.slab[0]
	p.slab = p.slab[1:]
	v.parent, v.key, v.index = parent, key, int32(index)
	return v
}

func (p *parser) syntaxf(format string, args ...any) {
	if p.pos >= len(p.src) {
		p.fatal = &Problem{Message: "invalid JSON: unexpected end of input"}
		return
	}
	p.fatal = &Problem{Message: fmt.Sprintf("invalid JSON at byte %d: ", p.pos) + fmt.Sprintf(format, args...)}
}

// unexpected reports the character at the current position.
func (p *parser) unexpected(context string) {
	if p.pos >= len(p.src) {
		p.syntaxf("")
		return
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	p.syntaxf("invalid character %s %s", strconv.QuoteRune(r), context)
}

func (p *parser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at the current position, which sits under parent
// at key (an object member) or index (an array item).
func (p *parser) value(parent *Value, key string, index int) *Value {
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.syntaxf("")
		return nil
	}
	v := p.newValue(parent, key, index)
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.container(v, ObjectKind)
	case c == '[':
		return p.container(v, Array)
	case c == '"':
		s, ok := p.string()
		if !ok {
			return nil
		}
		v.Kind, v.String = String, s
	case c == '-' || ('0' <= c && c <= '9'):
		n, ok := p.number(v)
		if !ok {
			return nil
		}
		v.Kind, v.Number = Number, json.Number(n)
	case p.literal("true"):
		v.Kind, v.Bool = Bool, true
	case p.literal("false"):
		v.Kind = Bool
	case p.literal("null"):
		v.Kind = Null
	default:
		if p.fatal == nil {
			p.unexpected("looking for the beginning of a value")
		}
		return nil
	}
	return v
}

// literal consumes word if the input continues with it.
func (p *parser) literal(word string) bool {
	rest := p.src[p.pos:]
	if len(rest) < len(word) {
		if rest == word[:len(rest)] {
			p.pos = len(p.src)
			p.syntaxf("")
		}
		return false
	}
	if rest[:len(word)] != word {
		return false
	}
	p.pos += len(word)
	return true
}

func (p *parser) container(v *Value, kind Kind) *Value {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > MaxDepth {
		p.fatal = &Problem{Path: v.Path(), Message: fmt.Sprintf("nesting too deep at byte %d: more than %d levels of arrays and objects", p.pos, MaxDepth)}
		return nil
	}
	p.pos++ // the opening bracket
	v.Kind = kind
	if kind == Array {
		return p.array(v)
	}
	return p.object(v)
}

func (p *parser) array(v *Value) *Value {
	start := len(p.items)
	defer func() { p.items = p.items[:start] }()
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		return v
	}
	for {
		item := p.value(v, "", len(p.items)-start)
		if item == nil {
			return nil
		}
		p.items = append(p.items, item)
		switch p.next(']', "after an array element") {
		case closed:
			v.Items = append([]*Value(nil), p.items[start:]...)
			return v
		case broken:
			return nil
		}
	}
}

// separation is what follows a value inside an array or an object.
type separation uint8

const (
	another separation = iota // a comma: another value follows
	closed                    // the container's closing byte
	broken                    // anything else, reported
)

// next reads, after a value in a container, the comma that continues it
// or the closing byte that ends it; anything else is a syntax problem
// reported as found where.
func (p *parser) next(closing byte, where string) separation {
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.syntaxf("")
		return broken
	}
	switch p.src[p.pos] {
	case ',':
		p.pos++
		return another
	case closing:
		p.pos++
		return closed
	}
	p.unexpected(where)
	return broken
}

// smallObject is how many keys an object holds before duplicates are found
// through a map instead of a scan.
const smallObject = 16

func (p *parser) object(v *Value) *Value {
	start := len(p.members)
	defer func() { p.members = p.members[:start] }()
	var seen map[string]struct{}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return v
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.src) {
			p.syntaxf("")
			return nil
		}
		if p.src[p.pos] != '"' {
			p.unexpected("looking for the beginning of an object key")
			return nil
		}
		key, ok := p.string()
		if !ok {
			return nil
		}
		p.skipSpace()
		if p.pos >= len(p.src) {
			p.syntaxf("")
			return nil
		}
		if p.src[p.pos] != ':' {
			p.unexpected("after an object key")
			return nil
		}
		p.pos++
		child := p.value(v, key, 0)
		if child == nil {
			return nil
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
		} else {
			for _, m := range p.members[start:] {
				if m.Key == key {
					dup = true
					break
				}
			}
		}
		if dup {
			if p.problems.room() {
				p.problems.add(Problem{Path: child.Path(), Message: "duplicate key"})
			} else {
				p.problems.truncated = true
			}
		} else {
			p.members = append(p.members, Member{Key: key, Value: child})
			if seen != nil {
				seen[key] = struct{}{}
			} else if len(p.members)-start > smallObject {
				seen = make(map[string]struct{}, 2*smallObject)
				for _, m := range p.members[start:] {
					seen[m.Key] = struct{}{}
				}
			}
		}
		switch p.next('}', "after an object value") {
		case closed:
			v.Members = append([]Member(nil), p.members[start:]...)
			return v
		case broken:
			return nil
		}
	}
}

// string parses a string literal; the position is at its opening quote.
func (p *parser) string() (string, bool) {
	p.pos++
	begin := p.pos
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			s := p.src[begin:p.pos]
			p.pos++
			return s, true
		case c == '\\':
			return p.escapedString(begin)
		case c < 0x20:
			p.unexpected("in a string literal")
			return "", false
		}
		p.pos++
	}
	p.syntaxf("")
	return "", false
}

// escapedString finishes a string that holds escapes; src[begin:pos] has
// none.
func (p *parser) escapedString(begin int) (string, bool) {
	b := append(p.scratch[:0], p.src[begin:p.pos]...)
	defer func() { p.scratch = b[:0] }()
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), true
		case c < 0x20:
			p.unexpected("in a string literal")
			return "", false
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++ // the backslash
		if p.pos >= len(p.src) {
			break
		}
		e := p.src[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if 0xD800 <= r && r < 0xDC00 {
				// A high surrogate pairs with a following \u low surrogate;
				// alone it is U+FFFD, as encoding/json has it.
				if rest := p.src[p.pos:]; len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
					save := p.pos
					p.pos += 2
					lo, ok := p.hex4()
					if ok && 0xDC00 <= lo && lo < 0xE000 {
						r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					} else {
						p.pos, p.fatal = save, nil
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			} else if 0xDC00 <= r && r < 0xE000 {
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			p.pos--
			p.unexpected("in a string escape code")
			return "", false
		}
	}
	p.syntaxf("")
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4() (rune, bool) {
	if len(p.src)-p.pos < 4 {
		p.pos = len(p.src)
		p.syntaxf("")
		return 0, false
	}
	var r rune
	for i := 0; i < 4; i++ {
		c := p.src[p.pos]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			p.unexpected("in a \\u escape")
			return 0, false
		}
		r = r<<4 | rune(d)
		p.pos++
	}
	return r, true
}

// number scans a number literal for v, refusing one with more than
// MaxNumberDigits digits.
func (p *parser) number(v *Value) (string, bool) {
	begin := p.pos
	digits := 0
	scanDigits := func() int {
		n := 0
		for p.pos < len(p.src) && '0' <= p.src[p.pos] && p.src[p.pos] <= '9' {
			p.pos++
			n++
		}
		digits += n
		return n
	}
	if p.src[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(p.src) && p.src[p.pos] == '0' {
		p.pos++
		digits++
	} else if scanDigits() == 0 {
		p.unexpected("in numeric literal")
		return "", false
	}
	if p.pos < len(p.src) && p.src[p.pos] == '.' {
		p.pos++
		if scanDigits() == 0 {
			p.unexpected("after decimal point in numeric literal")
			return "", false
		}
	}
	if p.pos < len(p.src) && (p.src[p.pos] == 'e' || p.src[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.src) && (p.src[p.pos] == '+' || p.src[p.pos] == '-') {
			p.pos++
		}
		if scanDigits() == 0 {
			p.unexpected("in exponent of numeric literal")
			return "", false
		}
	}
	if digits > MaxNumberDigits {
		p.fatal = &Problem{Path: v.Path(), Message: fmt.Sprintf("number too long at byte %d: %d digits, more than %d", begin, digits, MaxNumberDigits)}
		return "", false
	}
	return p.src[begin:p.pos], true
}
