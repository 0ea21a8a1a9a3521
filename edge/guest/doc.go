// Package guest runs WebAssembly guests for the node: an artifact store
// of modules named by their SHA-256 digest, and a node/runner Backend on
// the pure-Go wazero runtime that runs them as WASI commands under the
// permit's obligations.
//
// # Artifacts
//
// A release names its module by release.artifact_digest,
// "sha256:<64 lowercase hex>" ([ParseDigest]); the [Store] keeps it at
// ROOT/sha256/<hex>.wasm. [Store.Put] streams a body into a temporary
// file while hashing it, reads at most the size limit plus one byte,
// and publishes the file (fsync, rename, directory fsync) only when it
// hashes to the digest. [Store.Load] reads the file back and verifies the
// hash again before anything compiles it.
package guest
