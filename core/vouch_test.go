package core

import (
	"strings"
	"testing"
	"unsafe"

	"latent.dev/admission/policy"
)

// vouchingSource is a mapSource that vouches for its identities and
// counts how often it is asked. On a miss it returns near, the identity
// a catalog pin would call nearest.
type vouchingSource struct {
	mapSource
	asked int
	near  *policy.RevisionIdentity
}

func (s *vouchingSource) RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool) {
	s.asked++
	return s.mapSource.RevisionPolicy(rev)
}

func (s *vouchingSource) VerifiedRevision(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, *policy.RevisionIdentity, bool) {
	s.asked++
	for i := range s.entries {
		if e := &s.entries[i]; e.rev.RevisionIdentity == rev.RevisionIdentity {
			return e.policy, &e.rev.RevisionIdentity, true
		}
	}
	return nil, s.near, false
}

var _ ValidatedRevisionSource = (*vouchingSource)(nil)

// TestVouchedIdentities checks the step-2 shortcut for a source that
// vouches for its identities: a held identity is admitted after one
// lookup, a held identity beyond the node's length bounds and an identity
// the source does not hold still get step 2's answer, and a valid unknown
// identity gets step 5's.
func TestVouchedIdentities(t *testing.T) {
	long := strings.Repeat("r", 65) // the fixture node allows 64 bytes
	cases := []struct {
		name  string
		held  func(r *policy.ResolvedRevision) // changes the identity the source holds
		asked func(r *policy.ResolvedRevision) // changes the request's identity
		want  *rejection
		looks int
	}{
		{name: "a held identity is admitted after one lookup", looks: 1},
		{name: "a held route beyond the node's bound is step 2's answer",
			held: func(r *policy.ResolvedRevision) { r.Route = long }, asked: func(r *policy.ResolvedRevision) { r.Route = long },
			want: errRevisionRoute, looks: 1},
		{name: "a held release beyond the generated bound is step 2's answer",
			held:  func(r *policy.ResolvedRevision) { r.Release = strings.Repeat("x", 97) },
			asked: func(r *policy.ResolvedRevision) { r.Release = strings.Repeat("x", 97) }, want: errReleaseID, looks: 1},
		{name: "an unheld identity with a space is step 2's answer, not step 5's",
			asked: func(r *policy.ResolvedRevision) { r.Function = "re size" }, want: errRevisionFunction, looks: 1},
		{name: "an unheld valid identity is step 5's answer, asked once",
			asked: func(r *policy.ResolvedRevision) { r.Revision = "rev-other" }, want: errRevisionMissing, looks: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			src := &vouchingSource{}
			held := resizeRevision()
			if tc.held != nil {
				tc.held(&held)
			}
			src.add(held, resizePolicy())
			ctl := f.ctl.WithPolicySource(src)
			req := request("v")
			if tc.asked != nil {
				tc.asked(&req.Revision)
			}
			p, err := ctl.AdmitAt(req, at(0))
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("got %v, want admission", err)
			case tc.want != nil && err != tc.want.err():
				t.Fatalf("got %v, want %v", err, tc.want.err())
			}
			if p != nil {
				p.Release()
			}
			if src.asked != tc.looks {
				t.Fatalf("the source was asked %d times, want %d", src.asked, tc.looks)
			}
		})
	}
	t.Run("every held field beyond the node's bound is its own step-2 answer", func(t *testing.T) {
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
			f := newFixture(t, nil)
			src := &vouchingSource{}
			held := resizeRevision()
			fc.set(&held, strings.Repeat("x", fc.n))
			src.add(held, resizePolicy())
			req := request("v")
			req.Revision = held // the principal's tenant stays acme's
			_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != fc.want.err() {
				t.Errorf("%v: got %v", fc.want.err(), err)
			}
			// At exactly the bound the held identity is admitted.
			f = newFixture(t, nil)
			src = &vouchingSource{}
			held = resizeRevision()
			fc.set(&held, strings.Repeat("x", fc.n-1))
			src.add(held, resizePolicy())
			req = request("v")
			req.Revision = held
			if fc.want == errRevisionTenant {
				req.Principal.Tenant = held.Tenant // unknown tenant: step 3 answers
				_, err = f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
				wantError(t, err, CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
				continue
			}
			p, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != nil {
				t.Errorf("%v at the bound: %v", fc.want.err(), err)
				continue
			}
			p.Release()
		}
	})
	t.Run("on a miss, a field equal to the nearest held identity's is not scanned", func(t *testing.T) {
		// The probe breaks the source's promise on purpose: its nearest
		// identity has a function with a space. A request field equal to
		// it (the same bytes, or a copy) passes step 2 unscanned and gets
		// step 5's answer; a scan would have answered step 2.
		for _, copied := range []bool{false, true} {
			f := newFixture(t, nil)
			near := resizeRevision().RevisionIdentity
			near.Function = "re size"
			src := &vouchingSource{near: &near}
			src.add(resizeRevision(), resizePolicy())
			req := request("v")
			req.Revision.Function, req.Revision.Revision = near.Function, "rev-other"
			if copied {
				req.Revision.Function = strings.Clone(near.Function)
			}
			_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != errRevisionMissing.err() {
				t.Fatalf("copied %v: got %v, want step 5's %v", copied, err, errRevisionMissing.err())
			}
		}
	})
	t.Run("on a miss, every field that differs from the nearest identity's is scanned", func(t *testing.T) {
		for _, fc := range []struct {
			set  func(r *policy.RevisionIdentity, v string)
			want *rejection
		}{
			{func(r *policy.RevisionIdentity, v string) { r.Tenant = v }, errRevisionTenant},
			{func(r *policy.RevisionIdentity, v string) { r.Service = v }, errRevisionService},
			{func(r *policy.RevisionIdentity, v string) { r.Route = v }, errRevisionRoute},
			{func(r *policy.RevisionIdentity, v string) { r.Contract = v }, errRevisionContract},
			{func(r *policy.RevisionIdentity, v string) { r.Function = v }, errRevisionFunction},
			{func(r *policy.RevisionIdentity, v string) { r.Revision = v }, errRevisionID},
			{func(r *policy.RevisionIdentity, v string) { r.Release = v }, errReleaseID},
		} {
			f := newFixture(t, nil)
			near := resizeRevision().RevisionIdentity
			src := &vouchingSource{near: &near}
			req := request("v")
			fc.set(&req.Revision.RevisionIdentity, "x y")
			_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != fc.want.err() {
				t.Errorf("%v: got %v", fc.want.err(), err)
			}
		}
	})
	t.Run("on a miss, a field equal to the nearest identity's is still held to the node's bound", func(t *testing.T) {
		for _, fc := range []struct {
			set  func(r *policy.RevisionIdentity, v string)
			n    int
			want *rejection
		}{
			{func(r *policy.RevisionIdentity, v string) { r.Route = v }, 65, errRevisionRoute},
			{func(r *policy.RevisionIdentity, v string) { r.Release = v }, 97, errReleaseID},
		} {
			f := newFixture(t, nil)
			near := resizeRevision().RevisionIdentity
			fc.set(&near, strings.Repeat("x", fc.n))
			src := &vouchingSource{near: &near}
			req := request("v")
			req.Revision.RevisionIdentity = near
			req.Revision.Revision = "rev-other"
			if fc.want == errReleaseID {
				req.Revision.Revision = near.Revision
				req.Revision.Contract = "other"
			}
			_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
			if err != fc.want.err() {
				t.Errorf("%v: got %v", fc.want.err(), err)
			}
			// At exactly the bound the field passes step 2, and the
			// unheld identity gets step 5's answer.
			atBound := strings.Repeat("x", fc.n-1)
			fc.set(&near, atBound)
			fc.set(&req.Revision.RevisionIdentity, atBound)
			if _, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0)); err != errRevisionMissing.err() {
				t.Errorf("%v at the bound: got %v, want %v", fc.want.err(), err, errRevisionMissing.err())
			}
		}
	})
	t.Run("a principal that is not allowed is step 3's answer", func(t *testing.T) {
		f := newFixture(t, nil)
		src := &vouchingSource{}
		src.add(resizeRevision(), resizePolicy())
		req := request("v")
		req.Principal.Subject = "mallory"
		_, err := f.ctl.WithPolicySource(src).AdmitAt(req, at(0))
		wantError(t, err, CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
	})
	t.Run("a source that does not vouch is scanned and asked at step 5", func(t *testing.T) {
		f := newFixture(t, nil)
		if f.ctl.vouched != nil {
			t.Fatal("mapSource vouches")
		}
		req := request("v")
		req.Revision.Route = long
		_, err := f.ctl.AdmitAt(req, at(0))
		wantError(t, err, CodeInvalidArgument, ScopeRevision, DimRoute, ReasonIdentifierInvalid, false)
	})
}

// TestPermitIdentityIsVerifiedAndImmutable: through a vouching source the
// permit points to the source's copy of the identity; through any other
// it holds its own copy. Either way the grant reports the verified
// identity, a caller changing its request afterwards changes nothing, and
// a dropped permit of either layout is reclaimed.
func TestPermitIdentityIsVerifiedAndImmutable(t *testing.T) {
	f := newFixture(t, nil)
	src := &vouchingSource{}
	src.add(resizeRevision(), resizePolicy())
	f.source.add(resizeRevision(), resizePolicy())
	want := resizeRevision().RevisionIdentity
	for name, ctl := range map[string]*AdmissionController{"vouched": f.ctl.WithPolicySource(src), "owned": f.ctl} {
		t.Run(name, func(t *testing.T) {
			req := request("id-" + name)
			p, err := ctl.AdmitAt(req, at(0))
			if err != nil {
				t.Fatal(err)
			}
			s := p.state()
			if vouched := s.identity != nil; vouched != (name == "vouched") {
				t.Fatalf("identity pointer set: %v", vouched)
			}
			if name == "vouched" && s.identity != &src.entries[0].rev.RevisionIdentity {
				t.Fatal("the permit does not point to the source's identity")
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
// vouching source within the 160-byte size class: its identity and policy
// are pointers to the source's immutable copies.
func TestPermitBlockIsSmall(t *testing.T) {
	if n := unsafe.Sizeof(permitBlock{}); n > 160 {
		t.Fatalf("a permit block is %d bytes", n)
	}
}
