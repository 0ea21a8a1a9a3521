package policy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"latent.dev/admission/policy"
)

func TestCellClassNamesRoundTrip(t *testing.T) {
	want := []string{"tiny", "small", "standard", "large", "extra-large"}
	for i, name := range want {
		class := policy.CellClass(i)
		assert.Equal(t, name, class.String(), "CellClass(%d).String()", i)
		got, ok := policy.ParseCellClass(name)
		assert.True(t, ok, "ParseCellClass(%q) failed", name)
		assert.Equal(t, class, got, "ParseCellClass(%q)", name)
	}
	assert.Equal(t, "invalid-cell-class", policy.CellClass(policy.NumCellClasses).String())
	for _, name := range []string{"", "Tiny", "medium", "extra_large"} {
		_, ok := policy.ParseCellClass(name)
		assert.False(t, ok, "ParseCellClass(%q) succeeded", name)
	}
}

func TestThreadingNamesRoundTrip(t *testing.T) {
	for _, th := range []policy.Threading{policy.SingleThreaded, policy.MultiThreaded} {
		got, ok := policy.ParseThreading(th.String())
		assert.True(t, ok, "ParseThreading(%q) failed", th)
		assert.Equal(t, th, got, "ParseThreading(%q)", th)
	}
	assert.Equal(t, "invalid-threading", policy.Threading(0).String())
	_, ok := policy.ParseThreading("Single")
	assert.False(t, ok, `ParseThreading("Single") succeeded`)
}

func TestPrincipalKindNamesRoundTrip(t *testing.T) {
	for _, k := range []policy.PrincipalKind{policy.UserPrincipal, policy.ServicePrincipal, policy.AnonymousPrincipal} {
		got, ok := policy.ParsePrincipalKind(k.String())
		assert.True(t, ok, "ParsePrincipalKind(%q) failed", k)
		assert.Equal(t, k, got, "ParsePrincipalKind(%q)", k)
	}
	assert.Equal(t, "invalid-principal-kind", policy.PrincipalKind(0).String())
	_, ok := policy.ParsePrincipalKind("")
	assert.False(t, ok, `ParsePrincipalKind("") succeeded`)
}

func TestSets(t *testing.T) {
	cells := policy.CellClassSet(0).With(policy.Tiny).With(policy.ExtraLarge)
	for class := range policy.CellClass(policy.NumCellClasses) {
		assert.Equal(t, class == policy.Tiny || class == policy.ExtraLarge, cells.Has(class), "cell set Has(%v)", class)
	}
	threads := policy.ThreadingSet(0).With(policy.MultiThreaded)
	assert.False(t, threads.Has(policy.SingleThreaded), "threading set %b", threads)
	assert.True(t, threads.Has(policy.MultiThreaded), "threading set %b", threads)
	assert.False(t, policy.ThreadingSet(0xff).Has(0), "the zero threading model is in a full set")
}
