package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"latent.dev/admission/policy"
)

// fleetCases are the fleet block's rules: optional, strict inside, and
// naming configured tenants once each.
func fleetCases() []ruleCase {
	return []ruleCase{
		{name: "a file without a fleet block is valid"},
		{name: "a null fleet block counts as absent", edit: func(d *document) { d.set("fleet", nil) }},
		{name: "a fleet block marking no tenant is valid", edit: func(d *document) { d.set("fleet", map[string]any{"tenants": []any{}}) }},
		{name: "a fleet block marking two tenants is valid", edit: func(d *document) {
			d.set("fleet", map[string]any{"tenants": []any{"globex", "acme"}})
		}},
		{
			name: "a fleet block names an unknown tenant",
			edit: func(d *document) { d.set("fleet", map[string]any{"tenants": []any{"acme", "hooli"}}) },
			want: []want{{"fleet.tenants[1]", "is not a configured tenant"}},
		},
		{
			name: "a fleet block names a tenant twice",
			edit: func(d *document) { d.set("fleet", map[string]any{"tenants": []any{"acme", "globex", "acme"}}) },
			want: []want{{"fleet.tenants[2]", "is listed twice"}},
		},
		{
			name: "a fleet block without tenants",
			edit: func(d *document) { d.set("fleet", map[string]any{}) },
			want: []want{{"fleet.tenants", "missing"}},
		},
		{
			name: "a fleet block with an unknown key",
			edit: func(d *document) { d.set("fleet", map[string]any{"tenants": []any{"acme"}, "limit": 200}) },
			want: []want{{"fleet.limit", "unknown key"}},
		},
		{
			name: "a fleet block that is not an object",
			edit: func(d *document) { d.set("fleet", []any{"acme"}) },
			want: []want{{"fleet", "expected an object, got an array"}},
		},
		{
			name: "a fleet tenant that is not a string",
			edit: func(d *document) { d.set("fleet", map[string]any{"tenants": []any{"acme", 7}}) },
			want: []want{{"fleet.tenants[1]", "expected a string, got a number"}},
		},
		{
			name: "a tenant whose ID could not be read hides the fleet references, not its own problem",
			edit: func(d *document) {
				d.set("tenants[1].id", 1)
				d.set("fleet", map[string]any{"tenants": []any{"globex"}})
			},
			want: []want{{"tenants[1].id", "expected a string, got a number"}},
		},
	}
}

func TestDecodePolicyFleetBlock(t *testing.T) {
	for _, c := range fleetCases() {
		t.Run(c.name, func(t *testing.T) {
			p, err := policy.DecodePolicy(c.file(t))
			if c.want == nil {
				require.NoError(t, err, "DecodePolicy")
				_, err := policy.Compile(p)
				assert.NoError(t, err, "Compile")
				return
			}
			require.Error(t, err, "DecodePolicy accepted the file")
			assert.Nil(t, p)
			assertProblems(t, problemsOf(t, err), c.want)
		})
	}
}

// The block compiles to a flag per tenant ID; a tenant it does not mark,
// and every tenant of a file without it, is not fleet-limited.
func TestCompileFleetLimitedByTenantID(t *testing.T) {
	d := newDocument(t)
	d.set("fleet", map[string]any{"tenants": []any{"globex"}})
	p, err := policy.DecodePolicy(d.encode())
	require.NoError(t, err)
	c, err := policy.Compile(p)
	require.NoError(t, err)
	for id := range c.NumTenants() {
		s := c.Tenant(policy.TenantID(id))
		assert.Equal(t, s.Name == "globex", s.FleetLimited, "tenant %s", s.Name)
	}

	plain, err := policy.Compile(decodeValid(t))
	require.NoError(t, err)
	for id := range plain.NumTenants() {
		assert.False(t, plain.Tenant(policy.TenantID(id)).FleetLimited)
	}

	// The compiled flag does not follow later edits of the description.
	p.Fleet.Tenants[0] = "acme"
	acme, _ := c.TenantID("acme")
	assert.False(t, c.Tenant(acme).FleetLimited)
}

// A policy built in code is validated the same way.
func TestValidateFleetInCode(t *testing.T) {
	p := decodeValid(t)
	p.Fleet.Tenants = []string{"acme", "nobody"}
	assertProblems(t, problemsOf(t, p.Validate()), []want{{"fleet.tenants[1]", "is not a configured tenant"}})
}
