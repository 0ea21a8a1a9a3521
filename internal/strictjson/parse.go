package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
