package scenario

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"

	"latent.dev/admission/internal/strictjson"
)

// Mismatch is one expected key whose actual value differs.
type Mismatch struct {
	Key      string // dotted path inside the answer, e.g. budget.cpu_fuel
	Expected string // JSON text
	Actual   string // JSON text, or "(absent)"
}

func (m Mismatch) String() string {
	return fmt.Sprintf("key %q: expected %s, got %s", m.Key, m.Expected, m.Actual)
}

// Compare checks a partial expected answer against an actual one: every
// key of expect must equal the answer's value (numbers exactly, objects
// key by key the same way); keys expect leaves out are not compared.
func Compare(expect *strictjson.Value, actual Answer) []Mismatch {
	var out []Mismatch
	compareObject("", expect, actual, &out)
	return out
}

func compareObject(prefix string, expect *strictjson.Value, actual Answer, out *[]Mismatch) {
	for _, m := range expect.Members {
		key := m.Key
		if prefix != "" {
			key = prefix + "." + m.Key
		}
		got, present := actual[m.Key]
		if !present {
			*out = append(*out, Mismatch{Key: key, Expected: jsonText(m.Value), Actual: "(absent)"})
			continue
		}
		if m.Value.Kind == strictjson.ObjectKind {
			if sub, ok := got.(Answer); ok {
				compareObject(key, m.Value, sub, out)
				continue
			}
		}
		if !equal(m.Value, got) {
			*out = append(*out, Mismatch{Key: key, Expected: jsonText(m.Value), Actual: marshal(got)})
		}
	}
}

func equal(want *strictjson.Value, got any) bool {
	switch want.Kind {
	case strictjson.Null:
		return got == nil
	case strictjson.Bool:
		b, ok := got.(bool)
		return ok && b == want.Bool
	case strictjson.String:
		s, ok := got.(string)
		return ok && s == want.String
	case strictjson.Number:
		w, ok := new(big.Rat).SetString(string(want.Number))
		if !ok {
			return false
		}
		g, ok := numberOf(got)
		return ok && w.Cmp(g) == 0
	}
	return false
}

func numberOf(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case int64:
		return new(big.Rat).SetInt64(n), true
	case uint64:
		return new(big.Rat).SetUint64(n), true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	}
	return nil, false
}

// jsonText renders a parsed value back as compact JSON.
func jsonText(v *strictjson.Value) string {
	switch v.Kind {
	case strictjson.Null:
		return "null"
	case strictjson.Bool:
		return fmt.Sprint(v.Bool)
	case strictjson.Number:
		return string(v.Number)
	case strictjson.String:
		return marshal(v.String)
	case strictjson.Array:
		s := "["
		for i, it := range v.Items {
			if i > 0 {
				s += ","
			}
			s += jsonText(it)
		}
		return s + "]"
	}
	s := "{"
	for i, m := range v.Members {
		if i > 0 {
			s += ","
		}
		s += marshal(m.Key) + ":" + jsonText(m.Value)
	}
	return s + "}"
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// MarshalLine renders a step's answer as one JSON line with its index and
// op first.
func MarshalLine(res Result) string {
	keys := make([]string, 0, len(res.Answer))
	for k := range res.Answer {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	line := fmt.Sprintf(`{"step":%d,"op":%s`, res.Index, marshal(res.Op))
	for _, k := range keys {
		line += "," + marshal(k) + ":" + marshal(res.Answer[k])
	}
	return line + "}"
}
