package core

import (
	"strings"
	"testing"
	"unsafe"

	"latent.dev/admission/policy"
)

// TestHandles checks the fast path for a request whose handle the
// controller's source recognises: it is taken only for the source's own
// record with the request's identity unchanged, and every other request
// gets the answer the same identity gets without a handle.
func TestHandles(t *testing.T) {
	long := strings.Repeat("r", 65) // the fixture node allows 64 bytes
	other := &mapSource{}
	other.add(resizeRevision(), resizePolicy())
	cases := []struct {
		name   string
		handle func(f *fixture) RevisionHandle
		edit   func(r *policy.ResolvedRevision) // changes the request's identity after resolution
		want   *rejection
		looks  int // lookups by identity
	}{
		{name: "the source's own handle is admitted without a lookup",
			handle: func(f *fixture) RevisionHandle { return f.source.handle(resizeRevision().RevisionIdentity) }},
		{name: "no handle is looked up",
			handle: func(f *fixture) RevisionHandle { return nil }, looks: 1},
		{name: "a typed nil handle is looked up",
			handle: func(f *fixture) RevisionHandle { return (*mapHandle)(nil) }, looks: 1},
		{name: "another source's handle is looked up",
			handle: func(f *fixture) RevisionHandle { return other.handle(resizeRevision().RevisionIdentity) }, looks: 1},
		{name: "an edited revision ID is step 5's answer",
			handle: func(f *fixture) RevisionHandle { return f.source.handle(resizeRevision().RevisionIdentity) },
			edit:   func(r *policy.ResolvedRevision) { r.Revision = "rev-other" }, want: errRevisionMissing, looks: 1},
		{name: "an edited generation is step 5's answer",
			handle: func(f *fixture) RevisionHandle { return f.source.handle(resizeRevision().RevisionIdentity) },
			edit:   func(r *policy.ResolvedRevision) { r.Generation++ }, want: errRevisionMissing, looks: 1},
		{name: "an edited function with a space is step 2's answer, not step 5's",
			handle: func(f *fixture) RevisionHandle { return f.source.handle(resizeRevision().RevisionIdentity) },
			edit:   func(r *policy.ResolvedRevision) { r.Function = "re size" }, want: errRevisionFunction},
		{name: "an edited route beyond the node's bound is step 2's answer",
			handle: func(f *fixture) RevisionHandle { return f.source.handle(resizeRevision().RevisionIdentity) },
			edit:   func(r *policy.ResolvedRevision) { r.Route = long }, want: errRevisionRoute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, withHandle := range []bool{true, false} {
				f := newFixture(t, nil)
				req := request("h")
				if withHandle {
					req.Handle = tc.handle(f)
				}
				if tc.edit != nil {
					tc.edit(&req.Revision)
				}
				f.source.looked.Store(0)
				p, err := f.ctl.AdmitAt(req, at(0))
				switch {
				case tc.want == nil && err != nil:
					t.Fatalf("handle %v: got %v, want admission", withHandle, err)
				case tc.want != nil && err != tc.want.err():
					t.Fatalf("handle %v: got %v, want %v", withHandle, err, tc.want.err())
				}
				if p != nil {
					if got := p.Grant().Revision; got != resizeRevision().RevisionIdentity {
						t.Fatalf("granted %+v", got)
					}
					p.Release()
				}
				looks := tc.looks
				if !withHandle && tc.want != errRevisionFunction && tc.want != errRevisionRoute {
					looks = 1
				}
				if got := f.source.looked.Load(); got != int64(looks) {
					t.Fatalf("handle %v: %d lookups, want %d", withHandle, got, looks)
				}
			}
		})
	}
	t.Run("a held identity beyond the node's bound is step 2's answer, field by field", func(t *testing.T) {
		fields := []struct {
			set  func(r *policy.ResolvedRevision, v string)
			n    int // the node allows one byte less
			want *rejection
		}{
			{func(r *policy.ResolvedRevision, v string) { r.Tenant = v }, 65, errRevisionTenant},
			{func(r *policy.ResolvedRevision, v string) { r.Service = v }, 65, errRevisionService},
			{func(r *policy.ResolvedRevision, v string) { r.Route = v }, 65, errRevisionRoute},
			{func(r *policy.ResolvedRevision, v string) { r.Contract = v }, 65, errRevisionContract},
			{func(r *policy.ResolvedRevision, v string) { r.Function = v }, 65, errRevisionFunction},
			{func(r *policy.ResolvedRevision, v string) { r.Revision = v }, 97, errRevisionID},
			{func(r *policy.ResolvedRevision, v string) { r.Release = v }, 97, errReleaseID},
		}
		for _, fc := range fields {
			for _, n := range []int{fc.n, fc.n - 1} {
				f := newFixture(t, nil)
				src := &mapSource{}
				held := resizeRevision()
				fc.set(&held, strings.Repeat("x", n))
				src.add(held, resizePolicy())
				// The request names the record's identity, or names none
				// and carries it by its handle: the same answer.
				for _, named := range []bool{true, false} {
					req := request("v")
					req.Revision, req.Handle = held, src.handle(held.RevisionIdentity)
					if !named {
						req.Revision = policy.ResolvedRevision{}
					}
					p, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
					switch {
					case n == fc.n && err != fc.want.err():
						t.Errorf("%v (named %v): got %v", fc.want.err(), named, err)
					case n < fc.n && fc.want == errRevisionTenant:
						// At the bound an unknown tenant is step 3's answer.
						wantError(t, err, CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
					case n < fc.n && err != nil:
						t.Errorf("%v at the bound (named %v): %v", fc.want.err(), named, err)
					}
					if p != nil {
						p.Release()
					}
				}
			}
		}
	})
	t.Run("with an edited field, the fields equal to the record's are only length-checked", func(t *testing.T) {
		// The record's fields were validated by its source, so a field of
		// the request equal to one is checked against the node's bound
		// only; an empty one and any other field are scanned. This
		// source validates nothing, which shows what is scanned.
		cases := []struct {
			name string
			set  func(r *policy.ResolvedRevision)
			want *rejection
		}{
			{"a held route with a space", func(r *policy.ResolvedRevision) { r.Route = "re size" }, errRevisionMissing},
			{"a held route at the bound", func(r *policy.ResolvedRevision) { r.Route = strings.Repeat("x", 64) }, errRevisionMissing},
			{"a held route beyond the bound", func(r *policy.ResolvedRevision) { r.Route = strings.Repeat("x", 65) }, errRevisionRoute},
			{"a held release at the generated bound", func(r *policy.ResolvedRevision) { r.Release = strings.Repeat("x", 96) }, errRevisionMissing},
			{"a held release beyond the generated bound", func(r *policy.ResolvedRevision) { r.Release = strings.Repeat("x", 97) }, errReleaseID},
			{"a held empty contract", func(r *policy.ResolvedRevision) { r.Contract = "" }, errRevisionContract},
		}
		for _, tc := range cases {
			f := newFixture(t, nil)
			src := &mapSource{}
			held := resizeRevision()
			tc.set(&held)
			src.add(held, resizePolicy())
			req := request("v")
			req.Revision, req.Handle = held, src.handle(held.RevisionIdentity)
			req.Revision.Revision = "rev-edited" // scanned, valid, and not in the source
			_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != tc.want.err() {
				t.Errorf("%s: got %v, want %v", tc.name, err, tc.want.err())
			}
		}
	})
	t.Run("an unlisted principal of the record's tenant has its tenant only length-checked", func(t *testing.T) {
		// The principal's tenant equals the record's, which its source
		// validated: only the node's bound is checked (this source
		// validates nothing, so a tenant with a space shows it).
		for _, tc := range []struct {
			tenant string
			want   *rejection
		}{
			{strings.Repeat("t", 65), errPrincipalTenant},
			{strings.Repeat("t", 64), errPrincipalDenied},
			{"ac me", errPrincipalDenied},
		} {
			f := newFixture(t, nil)
			src := &mapSource{}
			held := resizeRevision()
			held.Tenant = tc.tenant
			src.add(held, resizePolicy())
			req := request("v")
			req.Revision, req.Handle = held, src.handle(held.RevisionIdentity)
			req.Principal.Tenant, req.Principal.Subject = strings.Clone(tc.tenant), "mallory"
			if _, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0)); err != tc.want.err() {
				t.Errorf("tenant %q: got %v, want %v", tc.tenant, err, tc.want.err())
			}
		}
	})
	t.Run("a principal that is not allowed is step 3's answer", func(t *testing.T) {
		f := newFixture(t, nil)
		req := request("v")
		req.Handle = f.source.handle(req.Revision.RevisionIdentity)
		req.Principal.Subject = "mallory"
		_, err := f.ctl.AdmitAt(req, at(0))
		wantError(t, err, CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
	})
	t.Run("a plain source ignores handles and scans", func(t *testing.T) {
		f := newFixture(t, nil)
		ctl := f.ctl.WithPolicySource(plainSource{f.source})
		if ctl.records != nil {
			t.Fatal("a plain source was taken for a record source")
		}
		req := request("v")
		req.Handle = f.source.handle(req.Revision.RevisionIdentity)
		p, err := ctl.AdmitAt(req, at(0))
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
		req.Revision.Route = long
		_, err = ctl.AdmitAt(req, at(0))
		wantError(t, err, CodeInvalidArgument, ScopeRevision, DimRoute, ReasonIdentifierInvalid, false)
	})
}

// TestPermitIdentityIsVerifiedAndImmutable: through a record source the
// permit points to the record's identity; through a plain one it holds a
// copy of its own. Either way the grant reports the verified identity, a
// caller changing its request afterwards changes nothing, and a dropped
// permit is reclaimed.
func TestPermitIdentityIsVerifiedAndImmutable(t *testing.T) {
	f := newFixture(t, nil)
	want := resizeRevision().RevisionIdentity
	for name, ctl := range map[string]*AdmissionController{"record": f.ctl, "plain": f.ctl.WithPolicySource(plainSource{f.source})} {
		t.Run(name, func(t *testing.T) {
			req := request("id-" + name)
			p, err := ctl.AdmitAt(req, at(0))
			if err != nil {
				t.Fatal(err)
			}
			s := p.state()
			if own := s.identity == &f.source.entries[0].rev.RevisionIdentity; own != (name == "record") {
				t.Fatalf("the permit points to the record's identity: %v", own)
			}
			req.Revision.Revision, req.Revision.Tenant = "changed", "changed"
			if got := p.Grant().Revision; got != want {
				t.Fatalf("grant identity %+v, want %+v", got, want)
			}
			func() { _, _ = ctl.AdmitAt(request("dropped-"+name), at(0)) }()
			before := f.provider.Metrics().Leaked
			if !waitForLeak(t, func() bool { return f.provider.Metrics().Leaked == before+1 }) {
				t.Fatal("a dropped permit was not reclaimed")
			}
			p.Release()
		})
	}
	f.isZero(t)
}

// TestPermitBlockIsSmall keeps the one allocation of an admission through a
// record source within the 112-byte size class: its identity and policy
// are pointers to the record's, and its controller stands for its
// provider and clock.
func TestPermitBlockIsSmall(t *testing.T) {
	if policy.MaxTrustClasses > 256 {
		t.Fatalf("a permit keeps its trust class's ID in a byte, but a policy may have %d", policy.MaxTrustClasses)
	}
	if n := unsafe.Sizeof(permitBlock{}); n > 112 {
		t.Fatalf("a permit block is %d bytes", n)
	}
}

// Step 2 compares the request's identity with the record's by the
// strings' bytes: an identity built apart, with no byte shared, is the
// record's (no lookup), and one that differs in one byte of one field
// (same length, so only the bytes tell) is verified by a lookup.
func TestAnIdentityIsTheRecordsByItsBytesNotItsAddresses(t *testing.T) {
	fresh := func(s string) string { return string([]byte(s)) }
	f := newFixture(t, nil)
	a := resizeRevision()
	b := a
	b.Tenant, b.Service, b.Route, b.Contract = fresh(a.Tenant), fresh(a.Service), fresh(a.Route), fresh(a.Contract)
	b.Function, b.Revision, b.Release = fresh(a.Function), fresh(a.Revision), fresh(a.Release)
	admit := func(r policy.ResolvedRevision) (int64, error) {
		req := request("bytes")
		req.Revision, req.Handle = r, f.source.handle(a.RevisionIdentity)
		f.source.looked.Store(0)
		p, err := f.ctl.AdmitAt(req, at(0))
		if p != nil {
			p.Release()
		}
		return f.source.looked.Load(), err
	}
	if looks, err := admit(b); err != nil || looks != 0 {
		t.Fatalf("an equal identity built apart: %v, %d lookups", err, looks)
	}
	fields := []*string{&b.Tenant, &b.Service, &b.Route, &b.Contract, &b.Function, &b.Revision, &b.Release}
	for i, fp := range fields {
		was := *fp
		*fp = was[:len(was)-1] + string(rune(was[len(was)-1]^1))
		// Another tenant is step 3's answer; any other field, step 5's.
		want, wantLooks := errRevisionMissing, int64(1)
		if i == 0 {
			want, wantLooks = errPrincipalDenied, 0
		}
		if looks, err := admit(b); err != want.err() || looks != wantLooks {
			t.Errorf("field %d: %q for %q: %v, %d lookups", i, *fp, was, err, looks)
		}
		*fp = was
	}
}

// A request that names no identity and carries its source's own handle is
// the handle's record's: admitted as the record without a lookup, its
// grant the record's identity. Without the handle, or with a handle the
// source does not recognise, or through a plain source, it names nothing
// and gets step 2's answer for its empty tenant.
func TestAHandleCarriesTheRevisionOfARequestThatNamesNone(t *testing.T) {
	other := &mapSource{}
	other.add(resizeRevision(), resizePolicy())
	f := newFixture(t, nil)
	own := f.source.handle(resizeRevision().RevisionIdentity)
	for name, tc := range map[string]struct {
		ctl    *AdmissionController
		handle RevisionHandle
		want   *rejection
	}{
		"own handle":       {f.ctl, own, nil},
		"no handle":        {f.ctl, nil, errRevisionTenant},
		"another's handle": {f.ctl, other.handle(resizeRevision().RevisionIdentity), errRevisionTenant},
		"plain source":     {f.ctl.WithPolicySource(plainSource{f.source}), own, errRevisionTenant},
		"typed nil handle": {f.ctl, (*mapHandle)(nil), errRevisionTenant},
	} {
		req := request("named-none")
		req.Revision, req.Handle = policy.ResolvedRevision{}, tc.handle
		f.source.looked.Store(0)
		p, err := tc.ctl.AdmitAt(req, at(0))
		switch {
		case tc.want == nil && err != nil:
			t.Fatalf("%s: %v", name, err)
		case tc.want != nil && err != tc.want.err():
			t.Fatalf("%s: got %v, want %v", name, err, tc.want.err())
		}
		if p != nil {
			if got := p.Grant().Revision; got != resizeRevision().RevisionIdentity {
				t.Fatalf("%s: granted %+v", name, got)
			}
			p.Release()
			if n := f.source.looked.Load(); n != 0 {
				t.Fatalf("%s: %d lookups", name, n)
			}
		}
	}
	// Step 3 judges the record's tenant: a listed principal of another
	// tenant is denied, not taken for the record's.
	req := request("named-none")
	req.Revision, req.Handle = policy.ResolvedRevision{}, own
	req.Principal.Tenant, req.Principal.Subject = "globex", "bob"
	_, err := f.ctl.AdmitAt(req, at(0))
	wantError(t, err, CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
}

// validAs checks only the length of an identifier equal to the held
// record's, scans any other, and refuses an empty one even when the held
// identity is empty too (noIdentity).
func TestValidAsChecksOnlyTheLengthOfTheHeldIdentifier(t *testing.T) {
	held := "rev-0001"
	for _, tc := range []struct {
		name string
		s    string
		max  uint32
		want bool
	}{
		{"equal, within the bound", string([]byte(held)), 8, true},
		{"equal, over the bound", string([]byte(held)), 7, false},
		{"another identifier", "rev-0002", 8, true},
		{"another, over the bound", "rev-00021", 8, false},
		{"an invalid one", "rev 0002", 8, false},
	} {
		same := true
		if got := validAs(tc.s, held, tc.max, &same); got != tc.want {
			t.Errorf("%s: validAs(%q, %q, %d) = %v", tc.name, tc.s, held, tc.max, got)
		}
		if want := tc.s == held; same != want {
			t.Errorf("%s: same is %v, want %v", tc.name, same, want)
		}
	}
	same := true
	if validAs(noIdentity.Tenant, noIdentity.Tenant, 8, &same) || validAs("", noIdentity.Tenant, 8, &same) || validAs("", held, 8, &same) {
		t.Error("an empty identifier is valid")
	}
}
