package model

import (
	"testing"

	"latent.dev/admission/policy"
)

var (
	wantFleetFull        = rejection("resource-exhausted", "fleet", "live-activations", "capacity-exhausted", true)
	wantFleetUnavailable = rejection("unavailable", "fleet", "fleet-slice", "fleet-unavailable", true)
	wantFleetRejected    = rejection("invalid-argument", "fleet", "fleet-slice", "fleet-slice-rejected", false)
)

func TestFleetScope(t *testing.T) {
	plain := newFixture(t, nil)
	p, err := plain.ctl.AdmitAt(request("a"), at(0))
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	wantRejection(t, plain.model.PublishFleetSlice("acme", 1, at(1000)), wantFleetRejected)

	f := newFixture(t, func(p *policy.NodeAdmissionPolicy) { p.Fleet.Tenants = []string{"acme"} })
	_, err = f.ctl.AdmitAt(request("a"), at(0))
	wantRejection(t, err, wantFleetUnavailable) // no slice: fail closed
	if err := f.model.PublishFleetSlice("acme", 1, at(1000)); err != nil {
		t.Fatal(err)
	}
	a, err := f.ctl.AdmitAt(request("a"), at(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ctl.AdmitAt(request("b"), at(0))
	wantRejection(t, err, wantFleetFull)
	a.Release()
	_, err = f.ctl.AdmitAt(request("b"), at(1000))
	wantRejection(t, err, wantFleetUnavailable) // at the deadline
	b, err := f.ctl.AdmitAt(request("b"), at(999))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.model.PublishFleetSlice("acme", 0, at(1000)); err != nil {
		t.Fatal(err)
	}
	if s, _ := f.model.TenantSnapshot("acme"); s.Live != 1 {
		t.Fatalf("a lowered slice revoked a reservation: live %d", s.Live)
	}
	_, err = f.ctl.AdmitAt(request("c"), at(0))
	wantRejection(t, err, wantFleetFull)
	b.Release()
	wantRejection(t, f.model.PublishFleetSlice("acme", -1, at(1000)), wantFleetRejected)
	_, err = f.ctl.AdmitAt(request("c"), at(0))
	wantRejection(t, err, wantFleetUnavailable) // a refused publish withdrew the slice
	if err := f.model.PublishFleetSlice("acme", 1, at(1000)); err != nil {
		t.Fatal(err)
	}
	if !f.model.WithdrawFleetSlice("acme") || plain.model.WithdrawFleetSlice("acme") {
		t.Fatal("WithdrawFleetSlice")
	}
	_, err = f.ctl.AdmitAt(request("c"), at(0))
	wantRejection(t, err, wantFleetUnavailable)
}
