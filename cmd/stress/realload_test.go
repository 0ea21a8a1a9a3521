package main

import (
	"bytes"
	"strings"
	"testing"
)

// With -load psi the soak runs against the node's real sampler over this
// machine, prints its sources, and every invariant still holds.
func TestShortSoakWithTheRealSampler(t *testing.T) {
	for _, mode := range [][]string{nil, {"-pipeline"}} {
		var out, errOut bytes.Buffer
		args := append([]string{"-load", "psi", "-duration", "1200ms", "-workers", "2", "-seed", "5"}, mode...)
		if code := run(args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out.String(), errOut.String())
		}
		text := out.String()
		for _, want := range []string{"load: the real sampler every 500ms, cpu from ", "samples published, 0 failed reads, 0 refused; sources cpu "} {
			if !strings.Contains(text, want) {
				t.Errorf("%v: report lacks %q:\n%s", args, want, text)
			}
		}
		if strings.Contains(text, "FAIL") {
			t.Errorf("%v: an invariant failed:\n%s", args, text)
		}
	}
}

func TestUnknownLoadModeIsMisuse(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-load", "sinusoidal"}, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
}
