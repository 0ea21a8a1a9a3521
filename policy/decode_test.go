package policy_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

// ruleCase is one broken (or deliberately borderline) policy file: the
// valid base file with one edit, and exactly the problems it must produce.
type ruleCase struct {
	name string
	// edit changes the base document; nil leaves it as it is.
	edit func(d *document)
	// raw, if set, rewrites the encoded text (for what a JSON tree cannot
	// hold: duplicate keys, syntax errors).
	raw  func(t testing.TB, data []byte) []byte
	want []want // nil: the file is valid
}

func (c ruleCase) file(t testing.TB) []byte {
	t.Helper()
	d := newDocument(t)
	if c.edit != nil {
		c.edit(d)
	}
	data := d.encode()
	if c.raw != nil {
		data = c.raw(t, data)
	}
	return data
}

// replaceOnce replaces the single occurrence of old in data.
func replaceOnce(t testing.TB, data []byte, old, new string) []byte {
	t.Helper()
	require.Equal(t, 1, bytes.Count(data, []byte(old)), "occurrences of %q in the base file", old)
	return bytes.Replace(data, []byte(old), []byte(new), 1)
}

func queueClass(name string, lo, hi int) map[string]any {
	return map[string]any{"name": name, "min_priority": lo, "max_priority": hi, "max_queued": 1}
}

// Messages shared by several cases.
const (
	notIdentifier = "is not a valid identifier (1 to 64 bytes of UTF-8 without white space or control characters)"
	wantWhole     = "expected a non-negative whole number, got "
)

// structuralCases break the file's shape: keys, types and numbers.
func structuralCases() []ruleCase {
	return []ruleCase{
		{
			name: "unknown key at the top level",
			edit: func(d *document) { d.set("colour", "blue") },
			want: []want{{"colour", "unknown key"}},
		},
		{
			name: "unknown key in a nested object",
			edit: func(d *document) { d.set("tenants[0].limits.max_parallel", 1) },
			want: []want{{"tenants[0].limits.max_parallel", "unknown key"}},
		},
		{
			name: "unknown keys of one object are reported sorted",
			edit: func(d *document) {
				d.set("node.zeta", 1)
				d.set("node.alpha", 1)
			},
			want: []want{{"node.alpha", "unknown key"}, {"node.zeta", "unknown key"}},
		},
		{
			name: "missing top-level key",
			edit: func(d *document) { d.remove("tenants") },
			want: []want{{"tenants", "missing"}},
		},
		{
			name: "missing nested key is reported with its full path",
			edit: func(d *document) { d.remove("tenants[0].limits.max_queued_reservations") },
			want: []want{{"tenants[0].limits.max_queued_reservations", "missing"}},
		},
		{
			name: "missing object hides the rules about the keys under it",
			edit: func(d *document) { d.remove("node.overload") },
			want: []want{{"node.overload", "missing"}},
		},
		{
			name: "string where a number belongs",
			edit: func(d *document) { d.set("tenants[0].maximum_payload_bytes", "262144") },
			want: []want{{"tenants[0].maximum_payload_bytes", wantWhole + "a string"}},
		},
		{
			name: "number where an array belongs",
			edit: func(d *document) { d.set("node.backends", 1) },
			want: []want{{"node.backends", "expected an array, got a number"}},
		},
		{
			name: "object where a string belongs",
			edit: func(d *document) { d.set("tenants[0].id", map[string]any{}) },
			want: []want{{"tenants[0].id", "expected a string, got an object"}},
		},
		{
			name: "array where an object belongs",
			edit: func(d *document) { d.set("node.limits", []any{}) },
			want: []want{{"node.limits", "expected an object, got an array"}},
		},
		{
			name: "null where a number belongs",
			edit: func(d *document) { d.set("queue_classes[0].max_queued", nil) },
			want: []want{{"queue_classes[0].max_queued", wantWhole + "null"}},
		},
		{
			name: "boolean where a number belongs",
			edit: func(d *document) { d.set("cell_classes[0].parallelism", true) },
			want: []want{{"cell_classes[0].parallelism", wantWhole + "a boolean"}},
		},
		{
			name: "string where a threshold belongs",
			edit: func(d *document) { d.set("node.overload.cpu_threshold", "0.9") },
			want: []want{{"node.overload.cpu_threshold", "expected a number, got a string"}},
		},
		{
			name: "array item of the wrong type",
			edit: func(d *document) { d.set("cell_classes[0].threading", []any{"single", 1}) },
			want: []want{{"cell_classes[0].threading[1]", "expected a string, got a number"}},
		},
		{
			name: "negative number",
			edit: func(d *document) { d.set("tenants[0].limits.max_live_activations", num("-1")) },
			want: []want{{"tenants[0].limits.max_live_activations", "must not be negative"}},
		},
		{
			name: "fractional number",
			edit: func(d *document) { d.set("tenants[0].limits.max_live_activations", num("1.5")) },
			want: []want{{"tenants[0].limits.max_live_activations", "must be a whole number"}},
		},
		{
			name: "whole number written with a fraction is accepted",
			edit: func(d *document) { d.set("tenants[0].limits.max_live_activations", num("8.0")) },
		},
		{
			name: "whole number written with an exponent is accepted",
			edit: func(d *document) { d.set("tenants[0].limits.max_live_activations", num("8e0")) },
		},
		{
			name: "number over uint64",
			edit: func(d *document) { d.set("tenants[0].limits.max_reserved_cpu_fuel", num("18446744073709551616")) },
			want: []want{{"tenants[0].limits.max_reserved_cpu_fuel", "is out of range (at most 18446744073709551615)"}},
		},
		{
			name: "largest uint64 is accepted",
			edit: func(d *document) { d.set("tenants[0].limits.max_reserved_cpu_fuel", num("18446744073709551615")) },
		},
		{
			name: "number over uint32 where a priority belongs",
			edit: func(d *document) { d.set("tenants[0].maximum_priority", num("4294967296")) },
			want: []want{{"tenants[0].maximum_priority", "is out of range (at most 4294967295)"}},
		},
		{
			name: "duplicate JSON key",
			raw: func(t testing.TB, data []byte) []byte {
				return replaceOnce(t, data, `"id": "acme",`, `"id": "acme", "id": "acme",`)
			},
			want: []want{{"tenants[0].id", "duplicate key"}},
		},
		{
			name: "duplicate JSON key is reported even when its second value is broken",
			raw: func(t testing.TB, data []byte) []byte {
				return replaceOnce(t, data, `"maximum_priority": 7,`, `"maximum_priority": 7, "maximum_priority": -1.5,`)
			},
			want: []want{{"tenants[0].maximum_priority", "duplicate key"}},
		},
		{
			name: "millisecond value that does not fit a time.Duration",
			edit: func(d *document) { d.set("node.deadline.safety_margin_ms", num("9223372036855")) },
			want: []want{{"node.deadline.safety_margin_ms", "does not fit a duration (at most 9223372036854 milliseconds)"}},
		},
		{
			name: "largest millisecond value that fits a time.Duration is accepted",
			edit: func(d *document) { d.set("node.deadline.safety_margin_ms", num("9223372036854")) },
		},
		{
			name: "missing node object hides the rules that read it",
			edit: func(d *document) { d.remove("node") },
			want: []want{{"node", "missing"}},
		},
		{
			name: "mistyped node maximum_priority hides the queue class range rules",
			edit: func(d *document) { d.set("node.maximum_priority", "9") },
			want: []want{{"node.maximum_priority", wantWhole + "a string"}},
		},
		{
			name: "mistyped cell class name hides the references to it",
			edit: func(d *document) { d.set("cell_classes[0].class", 1) },
			want: []want{{"cell_classes[0].class", "expected a string, got a number"}},
		},
		{
			name: "mistyped trust class name hides the references to it",
			edit: func(d *document) { d.set("trust_classes[1].name", 1) },
			want: []want{{"trust_classes[1].name", "expected a string, got a number"}},
		},
		{
			name: "an unrelated structural problem does not hide the queue class coverage",
			edit: func(d *document) {
				d.set("colour", "blue")
				d.set("queue_classes[1].min_priority", 6)
			},
			want: []want{{"colour", "unknown key"}, {"queue_classes", "priority 5 is in no queue class"}},
		},
		{
			name: "an unrelated structural problem does not hide a reference to no cell class",
			edit: func(d *document) {
				d.set("colour", "blue")
				d.push("tenants[0].cell_classes", "huge")
			},
			want: []want{{"colour", "unknown key"}, {"tenants[0].cell_classes[3]", "is not a configured cell class"}},
		},
		{
			name: "an unrelated structural problem does not hide a reference to no trust class",
			edit: func(d *document) {
				d.set("colour", "blue")
				d.push("tenants[0].trust_classes", "gold")
			},
			want: []want{{"colour", "unknown key"}, {"tenants[0].trust_classes[1]", "is not a configured trust class"}},
		},
		{
			name: "a broken tenant hides the rules under it, not those of a tenant whose index it prefixes",
			edit: func(d *document) {
				for i := len(d.get("tenants").([]any)); i <= 10; i++ {
					tenant := d.copyOf("tenants[1]")
					tenant["id"] = fmt.Sprintf("extra-%d", i)
					d.push("tenants", tenant)
				}
				d.set("tenants[1]", "globex")
				d.set("tenants[10].id", "acme")
			},
			want: []want{{"tenants[1]", "expected an object, got a string"}, {"tenants[10].id", "duplicates tenants[0]"}},
		},
		{
			name: "an unknown key named like the start of another key hides nothing under that key",
			edit: func(d *document) {
				d.set("tenant", 1)
				d.set("tenants[2].id", "acme")
			},
			want: []want{{"tenant", "unknown key"}, {"tenants[2].id", "duplicates tenants[0]"}},
		},
		{
			name: "syntax error stops decoding",
			raw: func(t testing.TB, data []byte) []byte {
				return replaceOnce(t, data, `"node": {`, `"node": {,`)
			},
			want: []want{{"", "invalid JSON at byte "}},
		},
		{
			name: "truncated file",
			raw:  func(t testing.TB, data []byte) []byte { return data[:len(data)/2] },
			want: []want{{"", "invalid JSON: unexpected end of input"}},
		},
		{
			name: "empty file",
			raw:  func(t testing.TB, data []byte) []byte { return nil },
			want: []want{{"", "invalid JSON: unexpected end of input"}},
		},
		{
			name: "data after the top-level object",
			raw:  func(t testing.TB, data []byte) []byte { return append(data, "{}"...) },
			want: []want{{"", "unexpected data after the top-level value"}},
		},
		{
			name: "top-level value that is not an object",
			raw:  func(t testing.TB, data []byte) []byte { return []byte(`["node"]`) },
			want: []want{{"", "expected an object, got an array"}},
		},
		{
			name: "invalid UTF-8 anywhere in the file",
			edit: func(d *document) { d.setRaw("tenants[0].id", "ac\xffme") },
			want: []want{{"", "UTF-8"}},
		},
	}
}

func allRuleCases() []ruleCase {
	var all []ruleCase
	all = append(all, structuralCases()...)
	all = append(all, ruleViolationCases()...)
	all = append(all, identifierCases()...)
	return all
}

func TestDecodePolicyAcceptsTheValidFiles(t *testing.T) {
	for _, file := range []string{validPolicyFile, "../testdata/policy/node.json"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(file)
			require.NoError(t, err)
			p, err := policy.DecodePolicy(data)
			require.NoError(t, err)
			assert.NotNil(t, p, "DecodePolicy returned a nil policy and no error")
		})
	}
}

func TestDecodePolicyRules(t *testing.T) {
	for _, c := range allRuleCases() {
		t.Run(c.name, func(t *testing.T) {
			p, err := policy.DecodePolicy(c.file(t))
			if c.want == nil {
				require.NoError(t, err, "DecodePolicy")
				_, err := policy.Compile(p)
				assert.NoError(t, err, "Compile")
				return
			}
			require.Error(t, err, "DecodePolicy accepted the file")
			assert.Nil(t, p, "DecodePolicy returned a policy along with its error")
			got := problemsOf(t, err)
			assertProblems(t, got, c.want)
		})
	}
}

// The error text is one `path: message` line per problem, in order.
func TestDecodePolicyErrorText(t *testing.T) {
	d := newDocument(t)
	d.set("colour", "blue")
	d.set("node.budget_ceiling.wall_time_ms", 0)
	_, err := policy.DecodePolicy(d.encode())
	const want = "colour: unknown key\nnode.budget_ceiling.wall_time_ms: must be positive"
	assert.EqualError(t, err, want)
}
