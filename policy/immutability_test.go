package policy_test

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"latent.dev/admission/policy"
)

// compiledDump is everything a compiled policy answers, for the names a
// probe asks about.
type compiledDump struct {
	Node                policy.NodeSettings
	Backends            []string
	StateModels         []string
	Features            []string
	Tenants             []policy.TenantSettings
	TrustClasses        []policy.TrustClassSettings
	QueueClasses        []policy.QueueClassSettings
	Cells               []policy.CellClassSettings
	PriorityTable       []string
	TenantIDs           map[string]string
	TrustClassIDs       map[string]string
	QueueClassIDs       map[string]string
	FeatureBits         map[string]string
	SupportedBackends   map[string]bool
	SupportedStateModel map[string]bool
	Authorized          map[string]bool
}

// probeNames lists every name in p, copied, so that the list survives
// changes to p.
func probeNames(p *policy.NodeAdmissionPolicy) []string {
	names := []string{"", "mutated", "nobody"}
	names = append(names, p.Node.Backends...)
	names = append(names, p.Node.StateModels...)
	for _, q := range p.QueueClasses {
		names = append(names, q.Name)
	}
	for _, c := range p.CellClasses {
		names = append(names, c.Class)
		names = append(names, c.Features...)
		names = append(names, c.Threading...)
	}
	for _, tc := range p.TrustClasses {
		names = append(names, tc.Name)
	}
	for _, t := range p.Tenants {
		names = append(names, t.ID)
		for _, pr := range t.Principals {
			names = append(names, pr.Subject, pr.Kind)
		}
	}
	return names
}

func dump(c *policy.Compiled, names []string) compiledDump {
	d := compiledDump{
		Node:                c.Node(),
		Backends:            c.Backends(),
		StateModels:         c.StateModels(),
		Features:            c.Features(),
		TenantIDs:           map[string]string{},
		TrustClassIDs:       map[string]string{},
		QueueClassIDs:       map[string]string{},
		FeatureBits:         map[string]string{},
		SupportedBackends:   map[string]bool{},
		SupportedStateModel: map[string]bool{},
		Authorized:          map[string]bool{},
	}
	for id := range c.NumTenants() {
		d.Tenants = append(d.Tenants, c.Tenant(policy.TenantID(id)))
	}
	for id := range c.NumTrustClasses() {
		d.TrustClasses = append(d.TrustClasses, c.TrustClass(policy.TrustClassID(id)))
	}
	for id := range c.NumQueueClasses() {
		d.QueueClasses = append(d.QueueClasses, c.QueueClass(policy.QueueClassID(id)))
	}
	for class := range policy.NumCellClasses + 1 {
		d.Cells = append(d.Cells, c.CellClass(policy.CellClass(class)))
	}
	for pr := uint32(0); pr <= c.Node().MaximumPriority+2; pr++ {
		id, ok := c.QueueClassFor(pr)
		d.PriorityTable = append(d.PriorityTable, fmt.Sprint(id, ok))
	}
	for _, n := range names {
		id, ok := c.TenantID(n)
		d.TenantIDs[n] = fmt.Sprint(id, ok)
		trust, ok := c.TrustClassID(n)
		d.TrustClassIDs[n] = fmt.Sprint(trust, ok)
		queue, ok := c.QueueClassID(n)
		d.QueueClassIDs[n] = fmt.Sprint(queue, ok)
		bit, ok := c.Feature(n)
		d.FeatureBits[n] = fmt.Sprint(bit, ok)
		d.SupportedBackends[n] = c.SupportsBackend(n)
		d.SupportedStateModel[n] = c.SupportsStateModel(n)
		for id := range c.NumTenants() {
			for kind := range policy.PrincipalKind(5) {
				d.Authorized[fmt.Sprint(id, kind, n)] = c.Authorized(policy.TenantID(id), kind, n)
			}
		}
	}
	return d
}

// scramble overwrites every string, number and slice element reachable
// from v, including slice elements between length and capacity, so that
// any memory the compiled policy still shared with v would show.
func scramble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scramble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			scramble(v.Field(i))
		}
	case reflect.Slice:
		v.SetLen(v.Cap())
		for i := range v.Len() {
			scramble(v.Index(i))
		}
	case reflect.String:
		v.SetString("mutated")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() / 2)
	default:
		panic(fmt.Sprintf("scramble: unhandled kind %v; extend it", v.Kind()))
	}
}

func TestCompiledSharesNothingWithItsSource(t *testing.T) {
	p, c := compileValid(t)
	names := probeNames(p)
	before := dump(c, names)

	scramble(reflect.ValueOf(p))
	if p.Tenants[0].ID != "mutated" || p.Node.Backends[0] != "mutated" ||
		p.CellClasses[0].Threading[0] != "mutated" || p.Tenants[0].Limits.MaxLiveActivations != 9 ||
		p.Node.BudgetCeiling.WallTime != 30*time.Second+1 {
		t.Fatal("scramble left the source policy as it was")
	}

	if after := dump(c, names); !reflect.DeepEqual(before, after) {
		t.Errorf("changing the source changed the compiled policy:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestCompiledAccessorsReturnCopies(t *testing.T) {
	p, c := compileValid(t)
	names := probeNames(p)
	before := dump(c, names)

	for _, s := range [][]string{c.Backends(), c.StateModels(), c.Features()} {
		for i := range s {
			s[i] = "mutated"
		}
		_ = append(s[:0], "appended")
	}
	if after := dump(c, names); !reflect.DeepEqual(before, after) {
		t.Errorf("changing returned slices changed the compiled policy:\nbefore %+v\nafter  %+v", before, after)
	}
	if !c.SupportsBackend("wasm") || !c.SupportsStateModel("stateless") {
		t.Error("the compiled policy lost its backend or state model")
	}
	if _, ok := c.Feature("simd"); !ok {
		t.Error("the compiled policy lost feature simd")
	}
}

// A compiled policy is read by many goroutines at once without locks.
func TestCompiledIsSafeToShare(t *testing.T) {
	p, c := compileValid(t)
	names := probeNames(p)
	want := dump(c, names)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if got := dump(c, names); !reflect.DeepEqual(got, want) {
				t.Error("concurrent reads disagree")
			}
		})
	}
	wg.Wait()
}
