package latentd

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"

	"latent.dev/admission/policy"
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
// name the file.
func LoadTokens(path string) (*Tokens, error) {
	data, err := readBounded(path, MaxTokenFileBytes)
	if err != nil {
		return nil, err
	}
	t, err := DecodeTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// readBounded reads path, failing when it holds more than limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
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
	root, err := parseStrictJSON(data)
	if err != nil {
		return nil, err
	}
	if err := root.object([]string{"tokens"}, nil); err != nil {
		return nil, err
	}
	list := root.fields["tokens"]
	if list.kind != '[' {
		return nil, fmt.Errorf("%s: must be an array, not %s", list.path, kindNames[list.kind])
	}
	t := &Tokens{}
	seen := map[[sha256.Size]byte]string{}
	for _, item := range list.items {
		e, err := decodeTokenEntry(item)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[e.digest]; dup {
			return nil, fmt.Errorf("%s.sha256: the same digest as %s", item.path, first)
		}
		seen[e.digest] = item.path
		t.entries = append(t.entries, e)
	}
	return t, nil
}

func decodeTokenEntry(v *jsonValue) (tokenEntry, error) {
	var e tokenEntry
	if err := v.object([]string{"sha256"}, []string{"admin", "metrics", "kind", "subject", "tenant", "service"}); err != nil {
		return e, err
	}
	digest, err := v.stringField("sha256")
	if err != nil {
		return e, err
	}
	raw, ok := parseHexDigest(digest)
	if !ok {
		return e, fmt.Errorf("%s.sha256: must be 64 lowercase hex digits (the SHA-256 of the token)", v.path)
	}
	e.digest = raw
	admin, err := v.boolField("admin")
	if err != nil {
		return e, err
	}
	metrics, err := v.boolField("metrics")
	if err != nil {
		return e, err
	}
	if admin && metrics {
		return e, fmt.Errorf("%s.metrics: an administrator token already reads every series", v.path)
	}
	if admin || metrics {
		what := "an administrator"
		if metrics {
			what = "a metrics"
		}
		for _, k := range []string{"kind", "subject", "tenant", "service"} {
			if _, has := v.fields[k]; has {
				return e, fmt.Errorf("%s.%s: %s token names no principal", v.path, k, what)
			}
		}
		e.principal = Principal{Admin: admin, Metrics: metrics}
		return e, nil
	}
	for _, k := range []string{"kind", "subject", "tenant"} {
		if _, has := v.fields[k]; !has {
			return e, fmt.Errorf("%s.%s: missing (required unless \"admin\" or \"metrics\" is true)", v.path, k)
		}
	}
	var p Principal
	kind, err := v.stringField("kind")
	if err != nil {
		return e, err
	}
	if p.Kind, ok = policy.ParsePrincipalKind(kind); !ok {
		return e, fmt.Errorf("%s.kind: must be \"user\" or \"service\"", v.path)
	}
	if p.Subject, err = v.stringField("subject"); err != nil {
		return e, err
	}
	if p.Tenant, err = v.stringField("tenant"); err != nil {
		return e, err
	}
	if p.Service, err = v.stringField("service"); err != nil {
		return e, err
	}
	for _, f := range []struct{ key, value string }{{"subject", p.Subject}, {"tenant", p.Tenant}} {
		if f.value == "" {
			return e, fmt.Errorf("%s.%s: must not be empty", v.path, f.key)
		}
	}
	e.principal = p
	return e, nil
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
