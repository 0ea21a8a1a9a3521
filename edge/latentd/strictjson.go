package latentd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// jsonValue is one strictly parsed JSON value with the path it sits at.
// Objects keep their keys in document order; a duplicate key is an error
// at parse time, so a file cannot say two things at once.
type jsonValue struct {
	path   string
	kind   byte // '{', '[', 's' (string), 'n' (number), 'b' (bool), 'z' (null)
	str    string
	num    json.Number
	boolv  bool
	keys   []string
	fields map[string]*jsonValue
	items  []*jsonValue
}

// maxJSONDepth bounds nesting, so a hostile file cannot exhaust the stack.
const maxJSONDepth = 32

// parseStrictJSON parses data as exactly one JSON value: duplicate keys,
// trailing data and nesting beyond maxJSONDepth are errors naming the
// path where they occur.
func parseStrictJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, "$", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("$: data after the top-level value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, path string, depth int) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, syntaxProblem(err))
	}
	return parseFrom(dec, tok, path, depth)
}

func syntaxProblem(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("unexpected end of input")
	}
	return err
}

func parseFrom(dec *json.Decoder, tok json.Token, path string, depth int) (*jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("%s: nested deeper than %d levels", path, maxJSONDepth)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &jsonValue{path: path, kind: '{', fields: map[string]*jsonValue{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("%s: %w", path, syntaxProblem(err))
				}
				key, _ := kt.(string)
				child := path + "." + key
				if _, dup := v.fields[key]; dup {
					return nil, fmt.Errorf("%s: duplicate key", child)
				}
				cv, err := parseValue(dec, child, depth+1)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, key)
				v.fields[key] = cv
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%s: %w", path, syntaxProblem(err))
			}
			return v, nil
		case '[':
			v := &jsonValue{path: path, kind: '['}
			for i := 0; dec.More(); i++ {
				cv, err := parseValue(dec, path+"["+strconv.Itoa(i)+"]", depth+1)
				if err != nil {
					return nil, err
				}
				v.items = append(v.items, cv)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("%s: %w", path, syntaxProblem(err))
			}
			return v, nil
		}
		return nil, fmt.Errorf("%s: unexpected %q", path, t)
	case string:
		return &jsonValue{path: path, kind: 's', str: t}, nil
	case json.Number:
		return &jsonValue{path: path, kind: 'n', num: t}, nil
	case bool:
		return &jsonValue{path: path, kind: 'b', boolv: t}, nil
	case nil:
		return &jsonValue{path: path, kind: 'z'}, nil
	}
	return nil, fmt.Errorf("%s: unexpected token", path)
}

var kindNames = map[byte]string{'{': "an object", '[': "an array", 's': "a string", 'n': "a number", 'b': "a boolean", 'z': "null"}

// object checks that v is an object whose keys are all in allowed and
// that every key in required is present.
func (v *jsonValue) object(required, optional []string) error {
	if v.kind != '{' {
		return fmt.Errorf("%s: must be an object, not %s", v.path, kindNames[v.kind])
	}
	known := map[string]bool{}
	for _, k := range required {
		known[k] = true
		if _, ok := v.fields[k]; !ok {
			return fmt.Errorf("%s.%s: missing", v.path, k)
		}
	}
	for _, k := range optional {
		known[k] = true
	}
	for _, k := range v.keys {
		if !known[k] {
			return fmt.Errorf("%s.%s: unknown key", v.path, k)
		}
	}
	return nil
}

// stringField returns the string at key, "" when absent.
func (v *jsonValue) stringField(key string) (string, error) {
	f, ok := v.fields[key]
	if !ok {
		return "", nil
	}
	if f.kind != 's' {
		return "", fmt.Errorf("%s: must be a string, not %s", f.path, kindNames[f.kind])
	}
	return f.str, nil
}

// boolField returns the boolean at key, false when absent.
func (v *jsonValue) boolField(key string) (bool, error) {
	f, ok := v.fields[key]
	if !ok {
		return false, nil
	}
	if f.kind != 'b' {
		return false, fmt.Errorf("%s: must be true or false, not %s", f.path, kindNames[f.kind])
	}
	return f.boolv, nil
}
