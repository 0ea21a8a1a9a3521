package guest

import (
	"crypto/sha256"
	"encoding/hex"
)

// digestPrefix is how a release names its artifact's hash
// (release.artifact_digest).
const digestPrefix = "sha256:"

// Digest is the SHA-256 of an artifact's bytes: its name in the store and
// in a release.
type Digest [sha256.Size]byte

// ParseDigest parses a release's artifact_digest: "sha256:" and 64
// lowercase hexadecimal digits, nothing else, so every artifact has
// exactly one spelling and one file name.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != len(digestPrefix)+2*sha256.Size || s[:len(digestPrefix)] != digestPrefix {
		return d, ErrBadDigest
	}
	for _, c := range []byte(s[len(digestPrefix):]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return d, ErrBadDigest
		}
	}
	if _, err := hex.Decode(d[:], []byte(s[len(digestPrefix):])); err != nil {
		return d, ErrBadDigest
	}
	return d, nil
}

// DigestOf is the digest of b.
func DigestOf(b []byte) Digest { return sha256.Sum256(b) }

// String is the release spelling, "sha256:<hex>".
func (d Digest) String() string { return digestPrefix + d.Hex() }

// Hex is the 64 lowercase hexadecimal digits, the artifact's file name
// without the ".wasm" extension.
func (d Digest) Hex() string { return hex.EncodeToString(d[:]) }
