package trace

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestFleetLinesDecodeStrictly(t *testing.T) {
	in := Line{Kind: KindFleet, Order: 7, T: 9, Fleet: &Fleet{Tenant: "acme", Published: true, Slice: 4, ValidUntilT: 1e9, Writes: 3}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Line
	if err := DecodeLine(data, &out); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if *out.Fleet != *in.Fleet || out.Order != 7 {
		t.Fatalf("decoded %+v, want %+v", out.Fleet, in.Fleet)
	}
	d := Line{Kind: KindDecision, Order: 8, Decision: &Decision{Stage: StageCore, Answer: AnswerAdmitted,
		Fleet: &FleetReading{Published: true, Slice: 4, RemainingNS: 5, Writes: 3}}}
	if data, err = json.Marshal(d); err != nil {
		t.Fatal(err)
	}
	if err := DecodeLine(data, &out); err != nil || out.Decision.Fleet == nil || *out.Decision.Fleet != *d.Decision.Fleet {
		t.Fatalf("%s: %v, %+v", data, err, out.Decision)
	}
	for _, bad := range []struct{ line, want string }{
		{`{"k":"fleet","order":1,"fleet_writes":1}`, `a "fleet" line`},
		{`{"k":"fleet","order":1,"fleet_tenant":"acme","fleet_writes":1,"fleet_colour":1}`, "unknown field"},
		{`{"k":"load","order":1,"fleet_tenant":"acme","fleet_writes":1}`, `"load" line`},
		{`{"k":"fleet","fleet_tenant":"acme","fleet_writes":1}`, "without an order"},
	} {
		err := DecodeLine([]byte(bad.line), &out)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.line, err, bad.want)
		}
	}
}
