package core

import (
	"strings"
	"testing"

	"latent.dev/admission/policy"
)

// Usage names every configured scope with its limits and reports what
// the per-scope snapshots report; a started permit holds no queued slot.
func TestUsageNamesEveryScopeWithItsLimits(t *testing.T) {
	f := newFixture(t, nil)
	c := f.provider.Policy()
	check := func(when string) {
		t.Helper()
		u := f.provider.Usage()
		if want := f.provider.NodeSnapshot(); u.Node != scopeOf("", want) {
			t.Errorf("%s: node %+v, want %+v", when, u.Node, want)
		}
		if len(u.Tenants) != c.NumTenants() || len(u.TrustClasses) != c.NumTrustClasses() || len(u.QueueClasses) != c.NumQueueClasses() {
			t.Fatalf("%s: scopes %+v", when, u)
		}
		for i, got := range u.Tenants {
			name := c.Tenant(policy.TenantID(i)).Name
			if want, _ := f.provider.TenantSnapshot(name); got != scopeOf(name, want) {
				t.Errorf("%s: tenant %+v, want %s %+v", when, got, name, want)
			}
		}
		for i, got := range u.TrustClasses {
			name := c.TrustClass(policy.TrustClassID(i)).Name
			if want, _ := f.provider.TrustClassSnapshot(name); got != scopeOf(name, want) {
				t.Errorf("%s: trust class %+v, want %s %+v", when, got, name, want)
			}
		}
		for i, got := range u.QueueClasses {
			name := c.QueueClass(policy.QueueClassID(i)).Name
			if queued, bound, _ := f.provider.QueueClassSnapshot(name); got != (QueueClassUsage{name, queued, bound}) {
				t.Errorf("%s: queue class %+v, want %s %d/%d", when, got, name, queued, bound)
			}
		}
		var configured []CellClassUsage
		for class := range policy.NumCellClasses {
			if live, ok := f.provider.CellClassSnapshot(policy.CellClass(class)); ok {
				configured = append(configured, CellClassUsage{policy.CellClass(class), live})
			}
		}
		if len(u.CellClasses) != len(configured) {
			t.Fatalf("%s: cell classes %+v, want %+v", when, u.CellClasses, configured)
		}
		for i := range configured {
			if u.CellClasses[i] != configured[i] {
				t.Errorf("%s: cell classes %+v, want %+v", when, u.CellClasses, configured)
			}
		}
	}
	check("empty")
	p, err := f.ctl.AdmitAt(request("usage-1"), at(1))
	if err != nil {
		t.Fatal(err)
	}
	if u := f.provider.Usage(); u.Node.Live != 1 || u.Node.Queued != 1 || u.Node.CPUFuel == 0 {
		t.Errorf("admitted: node %+v, want one live and queued reservation with fuel", u.Node)
	}
	check("admitted")
	exec, err := p.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	if u := f.provider.Usage(); u.Node.Live != 1 || u.Node.Queued != 0 {
		t.Errorf("started: node %+v, want live and not queued", u.Node)
	}
	check("started")
	exec.Release()
	check("released")
	f.isZero(t)
}

func scopeOf(name string, s QuotaSnapshot) ScopeUsage {
	return ScopeUsage{Name: name, Live: s.Live, Queued: s.Queued, CPUFuel: s.CPUFuel, MemoryBytes: s.MemoryBytes, Limits: s.Limits}
}

// Held names every scope a reservation holds, and nothing once it came
// back.
func TestUsageHeldNamesEveryHoldingScope(t *testing.T) {
	f := newFixture(t, nil)
	if held := f.provider.Usage().Held(); len(held) != 0 {
		t.Fatalf("an empty ledger holds %q", held)
	}
	p, err := f.ctl.AdmitAt(request("held-1"), at(1))
	if err != nil {
		t.Fatal(err)
	}
	held := strings.Join(f.provider.Usage().Held(), "\n")
	for _, want := range []string{"node: live=1 queued=1", "\ntenant ", "\ntrust class ", "\nqueue class ", "queued=1\ncell class ", "live=1"} {
		if !strings.Contains(held, want) {
			t.Errorf("held after an admission lacks %q:\n%s", want, held)
		}
	}
	exec, err := p.StartExecution()
	if err != nil {
		t.Fatal(err)
	}
	if held := strings.Join(f.provider.Usage().Held(), "\n"); strings.Contains(held, "queue class") || !strings.Contains(held, "queued=0") {
		t.Errorf("a started reservation holds no queued slot:\n%s", held)
	}
	exec.Release()
	if held := f.provider.Usage().Held(); len(held) != 0 {
		t.Errorf("after the release the ledger holds %q", held)
	}
}
