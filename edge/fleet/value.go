package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// maxLimit is the largest fleet limit a limit key may hold: the sum of a
// tenant's slices must fit an int64 with room to spare, and no tenant
// holds a billion live activations.
const maxLimit = 1_000_000_000

// maxValueBytes bounds a value the broker decodes; a longer one is bad
// input, refused before it is parsed.
const maxValueBytes = 256

// decodeLimit reads a limit key's value: a decimal integer in [0, 1e9],
// digits only, no sign, no leading zero, no space.
func decodeLimit(key string, v []byte) (int64, error) {
	if len(v) == 0 || len(v) > 10 {
		return 0, fmt.Errorf("%w: key %q: want a decimal integer of 1 to 10 digits, got %d bytes", ErrBadValue, key, len(v))
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: key %q: want a decimal integer (digits only), got %q", ErrBadValue, key, v)
		}
	}
	if len(v) > 1 && v[0] == '0' {
		return 0, fmt.Errorf("%w: key %q: a leading zero in %q", ErrBadValue, key, v)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n > maxLimit {
		return 0, fmt.Errorf("%w: key %q: %q is above the largest limit, %d", ErrBadValue, key, v, maxLimit)
	}
	return n, nil
}

// sliceValue is what a node's slice key holds: the slice it holds and the
// slice it wants, which the other nodes read to compute fair shares.
type sliceValue struct {
	Has   int64 `json:"has"`
	Wants int64 `json:"wants"`
}

func encodeSlice(s sliceValue) string {
	return `{"has":` + strconv.FormatInt(s.Has, 10) + `,"wants":` + strconv.FormatInt(s.Wants, 10) + `}`
}

// decodeSlice reads a slice key's value strictly: exactly the fields
// "has" and "wants", each an integer in [0, 1e9], nothing after the
// object.
func decodeSlice(key string, v []byte) (sliceValue, error) {
	var s struct {
		Has   *int64 `json:"has"`
		Wants *int64 `json:"wants"`
	}
	if len(v) > maxValueBytes {
		return sliceValue{}, fmt.Errorf("%w: key %q: %d bytes, more than %d", ErrBadValue, key, len(v), maxValueBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return sliceValue{}, fmt.Errorf("%w: key %q: %v", ErrBadValue, key, err)
	}
	if dec.More() {
		return sliceValue{}, fmt.Errorf("%w: key %q: data after the object", ErrBadValue, key)
	}
	if _, err := dec.Token(); err == nil {
		return sliceValue{}, fmt.Errorf("%w: key %q: data after the object", ErrBadValue, key)
	}
	if s.Has == nil || s.Wants == nil {
		return sliceValue{}, fmt.Errorf(`%w: key %q: want both "has" and "wants"`, ErrBadValue, key)
	}
	if *s.Has < 0 || *s.Has > maxLimit || *s.Wants < 0 || *s.Wants > maxLimit {
		return sliceValue{}, fmt.Errorf("%w: key %q: has %d, wants %d: each must be in [0, %d]", ErrBadValue, key, *s.Has, *s.Wants, maxLimit)
	}
	return sliceValue{Has: *s.Has, Wants: *s.Wants}, nil
}
