package strictjson

import (
	"encoding/json"
	"strconv"
)

// Encode writes v back as compact JSON, keys in document order; a
// duplicate key the parser reported is not in the tree, so it is not
// written either. A document that embeds another format (a scenario's
// policy or catalog) hands that part to its format's own public decoder
// this way, then places the decoder's problems under the part's path
// with [Within].
func Encode(v *Value) []byte { return appendValue(nil, v) }

func appendValue(b []byte, v *Value) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		return strconv.AppendBool(b, v.Bool)
	case Number:
		return append(b, v.Number...)
	case String:
		s, _ := json.Marshal(v.String) // a string always marshals
		return append(b, s...)
	case Array:
		b = append(b, '[')
		for i, it := range v.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, it)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i, m := range v.Members {
			if i > 0 {
				b = append(b, ',')
			}
			k, _ := json.Marshal(m.Key)
			b = append(append(b, k...), ':')
			b = appendValue(b, m.Value)
		}
		return append(b, '}')
	}
}

// Reported records under v's path every problem that err carries, whose
// paths are relative to v: the problems of v's part decoded on its own.
func (d *Decoder) Reported(v *Value, err error) {
	at := v.Path()
	for _, p := range AsProblems(err) {
		d.Problemf(Within(at, p.Path), "%s", p.Message)
	}
}
