package main

import (
	"bytes"
	"strings"
	"testing"
)

// `latentd soak` runs the soak (edge/soak, whose own tests check the
// mix), prints its report and exits 0 when every invariant held.
func TestSoakCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	code := soakMain([]string{"-requests", "300", "-duration", "2m", "-concurrency", "4"}, &out, &errOut)
	t.Log("\n" + out.String())
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"soak: 300 requests in ", "invariants: every reservation returned"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func TestSoakCommandMisuse(t *testing.T) {
	for _, args := range [][]string{{"-requests", "0"}, {"-nope"}} {
		var out, errOut bytes.Buffer
		if code := soakMain(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
