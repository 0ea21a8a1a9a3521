package edgecheck_test

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/edgecheck"
	"latent.dev/admission/policy"
)

// fixture is the repository's node policy and catalog: tenants acme
// (user alice, service billing) and globex (user bob); acme's route
// thumbs/resize.
func fixture(t *testing.T) (*core.LocalQuotaProvider, *catalog.Pin) {
	t.Helper()
	data, err := os.ReadFile("../../testdata/policy/node.json")
	require.NoError(t, err)
	pol, err := policy.DecodePolicy(data)
	require.NoError(t, err)
	provider, err := core.NewLocalQuotaProvider(pol)
	require.NoError(t, err)
	data, err = os.ReadFile("../../testdata/catalog/good.json")
	require.NoError(t, err)
	f, err := catalog.DecodeCatalogFile(data, true)
	require.NoError(t, err)
	c, err := catalog.FromFile(f)
	require.NoError(t, err)
	return provider, c.Pin()
}

var resize = catalog.Target{Tenant: "acme", Service: "thumbs", Route: "resize"}

// TestAuthorizeIsAdmissionsStep3 holds the edge's refusal to be the very
// error value Admit returns at step 3, for each principal step 3
// refuses, and lets a listed principal of the path's tenant through.
func TestAuthorizeIsAdmissionsStep3(t *testing.T) {
	provider, pin := fixture(t)
	rev, handle, err := edgecheck.Resolve(pin, resize, "")
	require.NoError(t, err)
	controller := provider.Controller(core.ControllerConfig{Source: pin})
	bob := core.Principal{Kind: policy.UserPrincipal, Subject: "bob", Tenant: "globex"}
	_, admitted := controller.Admit(&core.AdmissionRequest{ActivationID: "act-1", Principal: bob, Revision: *rev, Handle: handle})
	require.Error(t, admitted)
	var ce core.Error
	require.ErrorAs(t, admitted, &ce)
	require.Equal(t, core.ReasonPrincipalNotAuthorized, ce.Reason(), "the request must reach step 3 and stop there")

	for _, tc := range []struct {
		name  string
		admin bool
		who   core.Principal
	}{
		{"another tenant's principal", false, bob},
		{"a principal claiming the tenant it is not listed in", false, core.Principal{Kind: policy.UserPrincipal, Subject: "bob", Tenant: "acme"}},
		{"a service principal without its service", false, core.Principal{Kind: policy.ServicePrincipal, Subject: "billing", Tenant: "acme"}},
		{"an anonymous principal", false, core.Principal{Kind: policy.AnonymousPrincipal, Subject: "alice", Tenant: "acme"}},
		{"no kind", false, core.Principal{Subject: "alice", Tenant: "acme"}},
		{"an administrator", true, core.Principal{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := edgecheck.Authorize(provider, tc.admin, &tc.who, "acme")
			require.Error(t, err)
			require.True(t, errors.Is(err, admitted), "the edge's refusal is admission's own error value, got %v", err)
		})
	}
	for _, who := range []core.Principal{
		{Kind: policy.UserPrincipal, Subject: "alice", Tenant: "acme"},
		{Kind: policy.ServicePrincipal, Subject: "billing", Tenant: "acme", Service: "invoices"},
	} {
		require.NoError(t, edgecheck.Authorize(provider, false, &who, "acme"), "%+v", who)
	}
}

// TestResolveRefusesAlike holds a missing pin and a route that resolves
// to nothing to admission's answer for a forged revision.
func TestResolveRefusesAlike(t *testing.T) {
	_, pin := fixture(t)
	for _, tc := range []struct {
		name string
		pin  *catalog.Pin
		t    catalog.Target
	}{
		{"no pin", nil, resize},
		{"no such route", pin, catalog.Target{Tenant: "acme", Service: "thumbs", Route: "crop"}},
		{"another tenant", pin, catalog.Target{Tenant: "globex", Service: "thumbs", Route: "resize"}},
	} {
		rev, handle, err := edgecheck.Resolve(tc.pin, tc.t, "k")
		require.ErrorIs(t, err, core.ErrRevisionNotAvailable, tc.name)
		require.Nil(t, rev, tc.name)
		require.Nil(t, handle, tc.name)
	}
	rev, handle, err := edgecheck.Resolve(pin, resize, "k")
	require.NoError(t, err)
	require.NotNil(t, handle)
	require.Equal(t, "acme", rev.Tenant)
}
