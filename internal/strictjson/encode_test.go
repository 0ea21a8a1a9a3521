package strictjson

import (
	"errors"
	"testing"
)

func TestEncodeRoundTrips(t *testing.T) {
	doc := `{"a":[1,2.5e3,-0,{"b":null}],"c":"x\"\\\u0001é","d":true,"e":{}, "f":[],"a":7}`
	tree, problems := Parse([]byte(doc))
	if tree == nil || len(problems) != 1 || problems[0].Message != "duplicate key" {
		t.Fatalf("Parse: %v", problems)
	}
	got := string(Encode(tree))
	want := `{"a":[1,2.5e3,-0,{"b":null}],"c":"x\"\\\u0001é","d":true,"e":{},"f":[]}`
	if got != want {
		t.Errorf("Encode = %s\nwant     %s", got, want)
	}
	again, problems := Parse([]byte(got))
	if again == nil || len(problems) != 0 || string(Encode(again)) != got {
		t.Errorf("the encoding does not parse back to itself: %v", problems)
	}
}

func TestReportedPlacesProblemsUnderThePart(t *testing.T) {
	tree, _ := Parse([]byte(`{"outer":{"part":{}}}`))
	part := tree.Members[0].Value.Members[0].Value
	d := NewDecoder(nil)
	d.Reported(part, Problems{{Path: "x[0]", Message: "bad"}, {Message: "whole"}})
	d.Reported(part, errors.New("plain"))
	got := d.Problems()
	want := Problems{{Path: "outer.part.x[0]", Message: "bad"}, {Path: "outer.part", Message: "whole"}, {Path: "outer.part", Message: "plain"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d = %q, want %q", i, got[i], want[i])
		}
	}
}
