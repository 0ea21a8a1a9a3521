package core

import (
	"errors"
	"testing"

	"latent.dev/admission/policy"
)

// TestAuthorizePrincipalIsStepThree: the edge's question before a route
// is resolved answers nil exactly where Admit passes step 3, and refuses
// with the very error Admit returns there.
func TestAuthorizePrincipalIsStepThree(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name string
		who  Principal
		ok   bool
	}{
		{"a listed user of its own tenant", Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"}, true},
		{"an unlisted subject", Principal{Kind: policy.UserPrincipal, Subject: "mallory", Tenant: "acme"}, false},
		{"a listed user naming another tenant", Principal{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "globex"}, false},
		{"no kind", Principal{Subject: "alice", Tenant: "acme"}, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := f.provider.AuthorizePrincipal(&c.who, "acme")
			req := request("principal-" + string(rune('a'+i)))
			req.Principal = c.who
			p, admitErr := f.ctl.Admit(req)
			if p != nil {
				defer p.Release()
			}
			if c.ok {
				if err != nil || admitErr != nil {
					t.Fatalf("AuthorizePrincipal %v, Admit %v: want both to pass", err, admitErr)
				}
				return
			}
			if err == nil {
				t.Fatal("AuthorizePrincipal let an unauthorized principal through")
			}
			if !errors.Is(admitErr, err) {
				t.Fatalf("AuthorizePrincipal %v, Admit %v: not the same error", err, admitErr)
			}
		})
	}
}
