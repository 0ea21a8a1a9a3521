package policy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// validPolicyFile is a copy of the repository's example node policy; every
// broken file in these tests is this one with a single change.
const validPolicyFile = "testdata/valid.json"

func readValid(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(validPolicyFile)
	require.NoError(t, err)
	return data
}

// decodeValid returns the valid base policy, decoded.
func decodeValid(t testing.TB) *policy.NodeAdmissionPolicy {
	t.Helper()
	p, err := policy.DecodePolicy(readValid(t))
	require.NoError(t, err, "DecodePolicy(%s)", validPolicyFile)
	return p
}

// document is the valid policy as a generic JSON tree that a test changes
// in one place before encoding it again. Numbers stay json.Number so that
// values such as 2^64 survive the round trip verbatim.
type document struct {
	t    testing.TB
	root map[string]any
	// rawReplacements are applied to the encoded text, for bytes that
	// encoding/json would not write (invalid UTF-8).
	rawReplacements [][2]string
}

func newDocument(t testing.TB) *document {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(readValid(t)))
	dec.UseNumber()
	var root map[string]any
	require.NoError(t, dec.Decode(&root), "decoding %s", validPolicyFile)
	return &document{t: t, root: root}
}

// encode returns the document as JSON text.
func (d *document) encode() []byte {
	d.t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d.root); err != nil {
		d.t.Fatalf("encoding document: %v", err)
	}
	out := buf.String()
	for _, r := range d.rawReplacements {
		if strings.Count(out, r[0]) != 1 {
			d.t.Fatalf("raw replacement %q matches %d times", r[0], strings.Count(out, r[0]))
		}
		out = strings.Replace(out, r[0], r[1], 1)
	}
	return []byte(out)
}

// step is one segment of a path such as `tenants[0].limits.max_live_activations`.
type step struct {
	key   string
	index int // valid when key == ""
}

func parsePath(t testing.TB, path string) []step {
	t.Helper()
	var steps []step
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			steps = append(steps, step{key: name})
		}
		for rest != "" {
			num, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(num)
			if !ok || err != nil {
				t.Fatalf("bad path %q", path)
			}
			steps = append(steps, step{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return steps
}

// get returns the value at path.
func (d *document) get(path string) any {
	d.t.Helper()
	var cur any = d.root
	for _, s := range parsePath(d.t, path) {
		cur = d.child(cur, s, path)
	}
	return cur
}

func (d *document) child(cur any, s step, path string) any {
	d.t.Helper()
	if s.key != "" {
		m, ok := cur.(map[string]any)
		if !ok {
			d.t.Fatalf("path %q: %q is not under an object", path, s.key)
		}
		v, ok := m[s.key]
		if !ok {
			d.t.Fatalf("path %q: no key %q", path, s.key)
		}
		return v
	}
	a, ok := cur.([]any)
	if !ok || s.index >= len(a) {
		d.t.Fatalf("path %q: no index %d", path, s.index)
	}
	return a[s.index]
}

// parent returns the container holding the last step of path.
func (d *document) parent(path string) (any, step) {
	d.t.Helper()
	steps := parsePath(d.t, path)
	var cur any = d.root
	for _, s := range steps[:len(steps)-1] {
		cur = d.child(cur, s, path)
	}
	return cur, steps[len(steps)-1]
}

// set replaces (or adds) the value at path.
func (d *document) set(path string, v any) {
	d.t.Helper()
	c, last := d.parent(path)
	switch c := c.(type) {
	case map[string]any:
		c[last.key] = v
	case []any:
		c[last.index] = v
	}
}

// remove deletes the object key at path.
func (d *document) remove(path string) {
	d.t.Helper()
	c, last := d.parent(path)
	m, ok := c.(map[string]any)
	if !ok {
		d.t.Fatalf("remove %q: not an object key", path)
	}
	if _, ok := m[last.key]; !ok {
		d.t.Fatalf("remove %q: no such key", path)
	}
	delete(m, last.key)
}

// push appends v to the array at path.
func (d *document) push(path string, v any) {
	d.t.Helper()
	a, ok := d.get(path).([]any)
	if !ok {
		d.t.Fatalf("push %q: not an array", path)
	}
	d.set(path, append(a, v))
}

// copyOf returns a deep copy of the value at path, to add a near-duplicate.
func (d *document) copyOf(path string) map[string]any {
	d.t.Helper()
	data, err := json.Marshal(d.get(path))
	if err != nil {
		d.t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		d.t.Fatal(err)
	}
	return out
}

// setRaw makes the string at path hold raw bytes in the encoded file.
func (d *document) setRaw(path, raw string) {
	d.t.Helper()
	placeholder := fmt.Sprintf("RAW-PLACEHOLDER-%d", len(d.rawReplacements))
	d.set(path, placeholder)
	d.rawReplacements = append(d.rawReplacements, [2]string{`"` + placeholder + `"`, `"` + raw + `"`})
}

func num(s string) json.Number { return json.Number(s) }

// want is one expected problem: its exact path and a substring of its
// message.
type want struct {
	path    string
	message string
}

// problemsOf returns the problems err carries, failing the test when err is
// not a strictjson.Problems.
func problemsOf(t testing.TB, err error) strictjson.Problems {
	t.Helper()
	var ps strictjson.Problems
	require.ErrorAs(t, err, &ps)
	return ps
}

// matchProblems reports whether got is exactly wants, in order, and if
// not, a description of both.
func matchProblems(got strictjson.Problems, wants []want) (bool, string) {
	ok := len(got) == len(wants)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].Path == wants[i].path && strings.Contains(got[i].Message, wants[i].message)
	}
	if ok {
		return true, ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "got %d problems:\n", len(got))
	for _, p := range got {
		fmt.Fprintf(&b, "\t%q: %q\n", p.Path, p.Message)
	}
	fmt.Fprintf(&b, "want %d:\n", len(wants))
	for _, w := range wants {
		fmt.Fprintf(&b, "\t%q: ...%q...\n", w.path, w.message)
	}
	return false, b.String()
}

// assertProblems checks that got is exactly wants, in order.
func assertProblems(t testing.TB, got strictjson.Problems, wants []want) {
	t.Helper()
	if ok, diff := matchProblems(got, wants); !ok {
		t.Error(diff)
	}
}
