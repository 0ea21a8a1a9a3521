package core

import (
	"latent.dev/admission/policy"
)

// RevisionPolicySource is a pinned, immutable view of deployed revisions
// (the catalog's Pin satisfies it). Admission asks it, once per request,
// for the typed policy of the revision a request names.
type RevisionPolicySource interface {
	// RevisionPolicy verifies every field of the tenant, service, route,
	// contract, function, revision, release and generation tuple of rev
	// against the view and returns the revision's typed policy, or false
	// if any field differs or the revision is not in the view. It never
	// re-resolves, ignores rev.Attributes, must not allocate, block or
	// touch a file, and the returned policy must never change afterwards.
	RevisionPolicy(rev *policy.ResolvedRevision) (*policy.RevisionPolicy, bool)
}

// RevisionHandle refers to a source's own immutable record of one
// revision: its identity, its typed policy and the slot in which
// admission keeps the node requirements it derives from that policy. A
// route resolver hands one out beside the identity it resolved
// (catalog.Pin.Resolve does), and the adapter puts both in the request.
//
// Admission trusts nothing a handle says about itself: only the
// controller's own source, a [RecordSource], may recognise it, and only
// as one of its own records.
type RevisionHandle interface {
	// RevisionIdentity is the identity of the revision the handle refers
	// to.
	RevisionIdentity() policy.RevisionIdentity
}

// RecordSource is a source that keeps one immutable record per revision
// and whose resolver hands out [RevisionHandle]s to them. Each record
// carries a requirements slot, so admission derives a revision's node
// requirements once per record and provider rather than per request.
//
// A record is its identity, its policy and its slot: all three pointers
// stay valid and unchanged for as long as the record is reachable. The
// slot belongs to admission: nothing else may store into it (a slot
// found holding another type is left alone and its requirements derived
// per request, never a panic).
type RecordSource interface {
	RevisionPolicySource
	// OwnRecord returns the record h refers to when h is a handle that
	// this source handed out, recognised by pointer equality: no lookup,
	// no hash. For any other h (nil, another source's, one of another
	// view of the same catalog) ok is false. It must not allocate or
	// block. h is an any (always a RevisionHandle) so that a source in a
	// package that does not import core can declare the method.
	OwnRecord(h any) (identity *policy.RevisionIdentity, rev *policy.RevisionPolicy, requirements *policy.RecordSlot, ok bool)
	// RevisionRecord is RevisionPolicy that returns the whole record:
	// identity is the source's own, equal to rev's field by field. h is
	// the request's handle (often one of another revision of the same
	// deployment, which OwnRecord answered but step 2 did not take): a
	// source may start its search from it, and must answer alike for
	// every h. It must not allocate or block.
	RevisionRecord(h any, rev *policy.ResolvedRevision) (identity *policy.RevisionIdentity, p *policy.RevisionPolicy, requirements *policy.RecordSlot, ok bool)
}
