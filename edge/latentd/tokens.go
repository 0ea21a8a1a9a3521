package latentd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"latent.dev/admission/internal/boundedfile"
	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
	"latent.dev/admission/problems"
)

// MaxTokenFileBytes bounds a token file.
const MaxTokenFileBytes = 1 << 20

// Principal is who a bearer token stands for: a tenant's principal, an
// administrator (who invokes nothing and belongs to no tenant), or a
// metrics reader (who may only scrape every series of GET /metrics).
type Principal struct {
	Admin   bool
	Metrics bool
	Kind    policy.PrincipalKind
	Subject string
	Tenant  string
	Service string
}

// Tokens maps the SHA-256 digests of bearer tokens to principals. It never
// holds a token in clear, and it is immutable after LoadTokens.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest    [sha256.Size]byte
	principal Principal
}

// LoadTokens reads and decodes a token file (see DecodeTokens); errors
// name the file. Anything but a regular file (a FIFO, which would block
// a reload until it got a writer, a device) is refused.
func LoadTokens(path string) (*Tokens, error) {
	data, err := boundedfile.ReadRegular(path, MaxTokenFileBytes)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// DecodeTokens strictly decodes a token file:
//
//	{"tokens": [
//	  {"sha256": "<hex>", "kind": "user", "subject": "alice", "tenant": "acme", "service": ""},
//	  {"sha256": "<hex>", "admin": true},
//	  {"sha256": "<hex>", "metrics": true}
//	]}
//
// An unknown, missing, duplicate or mistyped key, a digest that is not 64
// lowercase hex digits or appears twice, and an administrator or metrics
// entry that also names a principal (or is both) are errors naming their
// JSON path.
func DecodeTokens(data []byte) (*Tokens, error) {
	tree, parseProblems := strictjson.Parse(data)
	if tree == nil {
		return nil, rooted(parseProblems)
	}
	d := strictjson.NewDecoder(parseProblems)
	root := d.Object(tree)
	items := root.Array("tokens")
	root.Done()
	t := &Tokens{}
	seen := map[[sha256.Size]byte]string{}
	for _, item := range items {
		if item.Kind != strictjson.ObjectKind {
			d.Object(item) // records that it is not an object
			continue
		}
		e, ok := decodeTokenEntry(d, d.Object(item))
		if !ok {
			continue
		}
		if first, dup := seen[e.digest]; dup {
			d.Problemf(strictjson.JoinKey(item.Path(), "sha256"), "the same digest as %s", rootedPath(first))
			continue
		}
		seen[e.digest] = item.Path()
		t.entries = append(t.entries, e)
	}
	if err := d.Err(); err != nil {
		return nil, rooted(strictjson.AsProblems(err))
	}
	return t, nil
}

// decodeTokenEntry decodes one entry of "tokens"; ok is false when it
// has a problem (recorded in d).
func decodeTokenEntry(d *strictjson.Decoder, o *strictjson.Object) (e tokenEntry, ok bool) {
	before := len(d.Problems())
	defer func() { ok = ok && len(d.Problems()) == before }()
	path := o.Path()
	at := func(key string) string { return strictjson.JoinKey(path, key) }
	digest := o.String("sha256")
	admin, metrics := o.OptionalBool("admin"), o.OptionalBool("metrics")
	if len(d.Problems()) != before && (o.Has("admin") || o.Has("metrics")) {
		o.Done()
		return e, false // a mistyped "admin" or "metrics": which kind of entry it is cannot be known
	}
	named := map[string]bool{}
	var p Principal
	for _, key := range []string{"kind", "subject", "tenant", "service"} {
		named[key] = o.Has(key)
	}
	kind, _ := o.Optional("kind")
	subject, _ := o.Optional("subject")
	tenant, _ := o.Optional("tenant")
	service, _ := o.Optional("service")
	o.Done()
	if raw, valid := parseHexDigest(digest); valid {
		e.digest = raw
	} else if o.Has("sha256") {
		d.Problemf(at("sha256"), "must be 64 lowercase hex digits (the SHA-256 of the token)")
	}
	switch {
	case admin && metrics:
		d.Problemf(at("metrics"), "an administrator token already reads every series")
		return e, false
	case admin || metrics:
		what := "an administrator"
		if metrics {
			what = "a metrics"
		}
		for _, key := range []string{"kind", "subject", "tenant", "service"} {
			if named[key] {
				d.Problemf(at(key), "%s token names no principal", what)
			}
		}
		e.principal = Principal{Admin: admin, Metrics: metrics}
		return e, true
	}
	for _, key := range []string{"kind", "subject", "tenant"} {
		if !named[key] {
			d.Problemf(at(key), "missing (required unless \"admin\" or \"metrics\" is true)")
		}
	}
	if kind != nil {
		if s, isString := d.String(kind); isString {
			var known bool
			if p.Kind, known = policy.ParsePrincipalKind(s); !known {
				d.Problemf(at("kind"), "must be \"user\" or \"service\"")
			}
		}
	}
	for _, f := range []struct {
		key   string
		value *strictjson.Value
		into  *string
	}{{"subject", subject, &p.Subject}, {"tenant", tenant, &p.Tenant}, {"service", service, &p.Service}} {
		if f.value == nil {
			continue
		}
		if s, isString := d.String(f.value); isString {
			*f.into = s
			if s == "" && f.key != "service" {
				d.Problemf(at(f.key), "must not be empty")
			}
		}
	}
	e.principal = p
	return e, true
}

// rooted writes problems' JSON paths from the document's root, `$`, as
// every path latentd reports does: `$.tokens[0].sha256`.
func rooted(ps strictjson.Problems) problems.List {
	out := make(problems.List, len(ps))
	for i, p := range ps {
		out[i] = problems.Problem{Path: rootedPath(p.Path), Message: p.Message}
	}
	return out
}

func rootedPath(path string) string {
	switch {
	case path == "":
		return "$"
	case path[0] == '[':
		return "$" + path
	}
	return "$." + path
}

// parseHexDigest decodes 64 lowercase hex digits.
func parseHexDigest(s string) ([sha256.Size]byte, bool) {
	var out [sha256.Size]byte
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(s)); err != nil {
		return out, false
	}
	return out, true
}

// Authenticate returns the principal of token. The token is hashed and
// compared with every entry's digest in constant time, so neither the
// answer's timing nor the position of a match says anything about the
// token.
func (t *Tokens) Authenticate(token string) (Principal, bool) {
	if t == nil || token == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return t.entries[found].principal, true
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}
