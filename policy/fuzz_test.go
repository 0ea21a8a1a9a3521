package policy_test

import (
	"errors"
	"testing"

	"latent.dev/admission/internal/strictjson"
	"latent.dev/admission/policy"
)

// FuzzDecodePolicy holds DecodePolicy to its contract on any input: it
// never panics, what it accepts compiles, and what it refuses comes with a
// non-empty list of problems.
func FuzzDecodePolicy(f *testing.F) {
	f.Add(readValid(f))
	for _, c := range allRuleCases() {
		f.Add(c.file(f))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.DecodePolicy(data)
		if err != nil {
			if p != nil {
				t.Fatal("DecodePolicy returned a policy along with its error")
			}
			var ps strictjson.Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error %T is not a strictjson.Problems: %v", err, err)
			}
			if len(ps) == 0 {
				t.Fatal("DecodePolicy failed with an empty list of problems")
			}
			for _, pr := range ps {
				if pr.Message == "" {
					t.Fatalf("problem at %q has no message", pr.Path)
				}
			}
			return
		}
		if p == nil {
			t.Fatal("DecodePolicy returned neither a policy nor an error")
		}
		c, err := policy.Compile(p)
		if err != nil {
			t.Fatalf("DecodePolicy accepted what Compile refuses: %v", err)
		}
		exercise(t, c)
	})
}

// exercise reads everything a compiled policy holds; it must not panic.
func exercise(t *testing.T, c *policy.Compiled) {
	for id := range c.NumTenants() {
		s := c.Tenant(policy.TenantID(id))
		if got, ok := c.TenantID(s.Name); !ok || got != s.ID {
			t.Fatalf("TenantID(%q) = %d, %v; want %d", s.Name, got, ok, s.ID)
		}
		c.Authorized(s.ID, policy.UserPrincipal, s.Name)
	}
	for id := range c.NumTrustClasses() {
		s := c.TrustClass(policy.TrustClassID(id))
		if got, ok := c.TrustClassID(s.Name); !ok || got != s.ID {
			t.Fatalf("TrustClassID(%q) = %d, %v; want %d", s.Name, got, ok, s.ID)
		}
	}
	for pr := uint32(0); pr <= c.Node().MaximumPriority; pr++ {
		q, ok := c.QueueClassFor(pr)
		if !ok {
			t.Fatalf("priority %d is in no queue class", pr)
		}
		if s := c.QueueClass(q); pr < s.MinPriority || pr > s.MaxPriority {
			t.Fatalf("priority %d maps to %+v", pr, s)
		}
	}
	for _, name := range c.Features() {
		if _, ok := c.Feature(name); !ok {
			t.Fatalf("feature %q has no bit", name)
		}
	}
}
