package guest_test

import (
	"context"
	"testing"

	"latent.dev/admission/edge/guest"
	"latent.dev/admission/node/runner"
)

// TestAnInstantiationFailureOfTheModulesOwnIsATrap: an active data
// segment past the memory fails instantiation; that is the guest's
// fault (502 trap), not the node's (500).
func TestAnInstantiationFailureOfTheModulesOwnIsATrap(t *testing.T) {
	// One segment for memory 0 at offset 65536 (one page), one byte.
	m := guestModule{bodies: [][]byte{body(noLocals)}, data: []byte{0x01, 0x00, 0x41, 0x80, 0x80, 0x04, 0x0b, 0x01, 0x2a}}.bytes()
	b, _ := ownBackend(t, guest.Config{}, m)
	d := deployment("acme", "init", map[string][]byte{"init": m})
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if rep := runOn(t, b, d, ask{route: "init", fuel: roomyFuel, memory: 1 << 20}); rep.Outcome != runner.Trapped {
		t.Fatalf("instantiation out of bounds: %+v, want a trap", rep)
	}
}

// TestInstantiationBurnsTheFuel: instantiating is part of the activation.
// A module whose instantiation makes a function reference for each of the
// most element entries the limits allow (milliseconds of work) and whose
// _start does nothing, granted a millisecond of fuel, runs out of it: the
// fuel clock runs from before the instantiation, not from _start.
func TestInstantiationBurnsTheFuel(t *testing.T) {
	m := limitParts{elements: [][]byte{concat([]byte{0x01, 0x00}, refFuncs(guest.MaxElementEntries, 0))}}.bytes()
	b, _ := ownBackend(t, guest.Config{}, m)
	d := deployment("acme", "init", map[string][]byte{"init": m})
	if err := b.Deploy(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if rep := runOn(t, b, d, ask{route: "init", fuel: 1_000_000, memory: 1 << 20}); rep.Outcome != runner.FuelExhausted {
		t.Fatalf("%d element entries on a millisecond of fuel: %+v, want its fuel exhausted", guest.MaxElementEntries, rep)
	}
}
