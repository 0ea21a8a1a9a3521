package policy_test

import (
	"testing"

	"latent.dev/admission/policy"
)

func TestCellClassNamesRoundTrip(t *testing.T) {
	want := []string{"tiny", "small", "standard", "large", "extra-large"}
	for i, name := range want {
		class := policy.CellClass(i)
		if class.String() != name {
			t.Errorf("CellClass(%d).String() = %q, want %q", i, class, name)
		}
		if got, ok := policy.ParseCellClass(name); !ok || got != class {
			t.Errorf("ParseCellClass(%q) = %v, %v", name, got, ok)
		}
	}
	if got := policy.CellClass(policy.NumCellClasses).String(); got != "invalid-cell-class" {
		t.Errorf("String of an invalid class = %q", got)
	}
	for _, name := range []string{"", "Tiny", "medium", "extra_large"} {
		if _, ok := policy.ParseCellClass(name); ok {
			t.Errorf("ParseCellClass(%q) succeeded", name)
		}
	}
}

func TestThreadingNamesRoundTrip(t *testing.T) {
	for _, th := range []policy.Threading{policy.SingleThreaded, policy.MultiThreaded} {
		if got, ok := policy.ParseThreading(th.String()); !ok || got != th {
			t.Errorf("ParseThreading(%q) = %v, %v", th, got, ok)
		}
	}
	if got := policy.Threading(0).String(); got != "invalid-threading" {
		t.Errorf("Threading(0).String() = %q", got)
	}
	if _, ok := policy.ParseThreading("Single"); ok {
		t.Error(`ParseThreading("Single") succeeded`)
	}
}

func TestPrincipalKindNamesRoundTrip(t *testing.T) {
	for _, k := range []policy.PrincipalKind{policy.UserPrincipal, policy.ServicePrincipal, policy.AnonymousPrincipal} {
		if got, ok := policy.ParsePrincipalKind(k.String()); !ok || got != k {
			t.Errorf("ParsePrincipalKind(%q) = %v, %v", k, got, ok)
		}
	}
	if got := policy.PrincipalKind(0).String(); got != "invalid-principal-kind" {
		t.Errorf("PrincipalKind(0).String() = %q", got)
	}
	if _, ok := policy.ParsePrincipalKind(""); ok {
		t.Error(`ParsePrincipalKind("") succeeded`)
	}
}

func TestSets(t *testing.T) {
	cells := policy.CellClassSet(0).With(policy.Tiny).With(policy.ExtraLarge)
	for class := range policy.CellClass(policy.NumCellClasses) {
		if got, want := cells.Has(class), class == policy.Tiny || class == policy.ExtraLarge; got != want {
			t.Errorf("cell set Has(%v) = %v", class, got)
		}
	}
	threads := policy.ThreadingSet(0).With(policy.MultiThreaded)
	if threads.Has(policy.SingleThreaded) || !threads.Has(policy.MultiThreaded) {
		t.Errorf("threading set %b", threads)
	}
	if policy.ThreadingSet(0xff).Has(0) {
		t.Error("the zero threading model is in a full set")
	}
}
