package catalog

import (
	"crypto/sha256"
	"encoding/hex"
)

// Identities are SHA-256 digests of content, so they are the same in every
// process that sees the same deployment. Each hashed field is length
// prefixed (see appendString), so no two field sequences share an input,
// and a domain string keeps release and revision digests apart. The full
// 256-bit digest in hex plus a four-byte prefix is 68 bytes: within the 83
// bytes every node allows generated identities, with no truncation.
const (
	releaseDomain  = "latent.dev/admission/catalog/release/v1"
	revisionDomain = "latent.dev/admission/catalog/revision/v1"
	releasePrefix  = "rel-"
	revisionPrefix = "rev-"
)

// IdentityBytes is the length of every generated identity.
const IdentityBytes = len(revisionPrefix) + 2*sha256.Size

// ReleaseID is the identity of a release: a digest of its artifact digest
// and version.
func ReleaseID(r Release) string {
	b := appendString(nil, releaseDomain)
	b = appendString(b, r.ArtifactDigest)
	b = appendString(b, r.Version)
	return digestID(releasePrefix, b)
}

// revisionID expects rev already normalized.
func revisionID(tenant, service string, route *Route, releaseID string, rev *Revision) string {
	b := appendString(nil, revisionDomain)
	b = appendString(b, tenant)
	b = appendString(b, service)
	b = appendString(b, route.Name)
	b = appendString(b, route.Contract)
	b = appendString(b, route.Function)
	b = appendString(b, releaseID)
	b = appendPolicy(b, &rev.Policy)
	return digestID(revisionPrefix, b)
}

func digestID(prefix string, input []byte) string {
	sum := sha256.Sum256(input)
	return prefix + hex.EncodeToString(sum[:])
}
