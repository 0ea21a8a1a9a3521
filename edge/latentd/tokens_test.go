package latentd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"latent.dev/admission/policy"
	"latent.dev/admission/problems"
)

func TestDecodeTokensRejects(t *testing.T) {
	d := digestHex("x")
	for _, tc := range []struct{ name, doc, want string }{
		{"not JSON", `{`, "$: "},
		{"trailing data", `{"tokens":[]} {}`, "$: unexpected data after the top-level value"},
		{"unknown top-level key", `{"tokens":[],"extra":1}`, "$.extra: unknown key"},
		{"missing tokens", `{}`, "$.tokens: missing"},
		{"tokens not an array", `{"tokens":{}}`, "$.tokens: expected an array, got an object"},
		{"duplicate key", `{"tokens":[],"tokens":[]}`, "$.tokens: duplicate key"},
		{"unknown entry key", `{"tokens":[{"sha256":"` + d + `","admin":true,"role":"x"}]}`, "$.tokens[0].role: unknown key"},
		{"missing digest", `{"tokens":[{"admin":true}]}`, "$.tokens[0].sha256: missing"},
		{"digest too short", `{"tokens":[{"sha256":"abc","admin":true}]}`, "$.tokens[0].sha256: must be 64 lowercase hex"},
		{"digest upper case", `{"tokens":[{"sha256":"` + strings.ToUpper(d) + `","admin":true}]}`, "$.tokens[0].sha256: must be 64 lowercase hex"},
		{"digest not hex", `{"tokens":[{"sha256":"` + strings.Repeat("g", 64) + `","admin":true}]}`, "$.tokens[0].sha256: must be 64 lowercase hex"},
		{"digest twice", `{"tokens":[{"sha256":"` + d + `","admin":true},{"sha256":"` + d + `","admin":true}]}`, "$.tokens[1].sha256: the same digest as $.tokens[0]"},
		{"admin not a boolean", `{"tokens":[{"sha256":"` + d + `","admin":"yes"}]}`, "$.tokens[0].admin: expected true or false, got a string"},
		{"admin naming a principal", `{"tokens":[{"sha256":"` + d + `","admin":true,"tenant":"acme"}]}`, "$.tokens[0].tenant: an administrator token names no principal"},
		{"metrics naming a principal", `{"tokens":[{"sha256":"` + d + `","metrics":true,"subject":"a"}]}`, "$.tokens[0].subject: a metrics token names no principal"},
		{"admin and metrics", `{"tokens":[{"sha256":"` + d + `","admin":true,"metrics":true}]}`, "$.tokens[0].metrics: an administrator token already reads every series"},
		{"metrics not a boolean", `{"tokens":[{"sha256":"` + d + `","metrics":1}]}`, "$.tokens[0].metrics: expected true or false, got a number"},
		{"principal without kind", `{"tokens":[{"sha256":"` + d + `","subject":"a","tenant":"t"}]}`, "$.tokens[0].kind: missing"},
		{"unknown kind", `{"tokens":[{"sha256":"` + d + `","kind":"robot","subject":"a","tenant":"t"}]}`, "$.tokens[0].kind: must be"},
		{"empty subject", `{"tokens":[{"sha256":"` + d + `","kind":"user","subject":"","tenant":"t"}]}`, "$.tokens[0].subject: must not be empty"},
		{"subject a number", `{"tokens":[{"sha256":"` + d + `","kind":"user","subject":1,"tenant":"t"}]}`, "$.tokens[0].subject: expected a string, got a number"},
		{"too deep", `{"tokens":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}`, "nesting too deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeTokens([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") != 0 {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestTokensAuthenticate(t *testing.T) {
	tok := testTokens(t)
	if p, ok := tok.Authenticate(aliceToken); !ok || p != (Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"}) {
		t.Errorf("alice: %+v %v", p, ok)
	}
	if p, ok := tok.Authenticate(adminToken); !ok || p != (Principal{Admin: true}) {
		t.Errorf("admin: %+v %v", p, ok)
	}
	if p, ok := tok.Authenticate(metricsToken); !ok || p != (Principal{Metrics: true}) {
		t.Errorf("metrics: %+v %v", p, ok)
	}
	for _, bad := range []string{"", "alice-secret ", digestHex(aliceToken)} {
		if _, ok := tok.Authenticate(bad); ok {
			t.Errorf("%q authenticated", bad)
		}
	}
	var none *Tokens
	if _, ok := none.Authenticate(aliceToken); ok || none.Len() != 0 {
		t.Error("a nil token set authenticated")
	}
}

func TestLoadTokensNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tokens":[{"sha256":"x","admin":true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTokens(path); err == nil || !strings.HasPrefix(err.Error(), path+": $.tokens[0].sha256") {
		t.Errorf("%v", err)
	}
	if _, err := LoadTokens(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("%v", err)
	}
}

// Every problem of a token file is reported at once, each at its path.
func TestDecodeTokensReportsEveryProblem(t *testing.T) {
	_, err := DecodeTokens([]byte(`{"tokens":[{"sha256":"x","admin":true},{"sha256":"` + digestHex("y") + `","kind":"robot","subject":"a","tenant":"t"}],"extra":1}`))
	var ps problems.List
	if !errors.As(err, &ps) {
		t.Fatalf("error %T %v is not a problems.List", err, err)
	}
	want := []string{"$.extra", "$.tokens[0].sha256", "$.tokens[1].kind"}
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("paths %q, want %q (%v)", got, want, err)
	}
}
