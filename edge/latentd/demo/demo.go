// Package demo is latentd's embedded demonstration: a node policy, a
// catalog of one deployment (acme/hello, route greet), a token file and
// the guest it runs (a hand-assembled WASI command that writes "hello, "
// and then its standard input). `latentd` serves it when given no flags;
// edge/soak (and so `latentd soak` and `cmd/stress -http`) soaks it.
//
// The package imports only the library (policy, catalog), so that the
// edge's latentd package may import it.
package demo

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"

	"latent.dev/admission/catalog"
	"latent.dev/admission/policy"
)

//go:embed policy.json catalog.json tokens.json hello.wasm
var files embed.FS

// The demonstration tokens (their SHA-256 digests are in tokens.json).
const (
	UserToken  = "latent-demo-alice" // alice, tenant acme
	AdminToken = "latent-demo-admin"
)

func mustRead(name string) []byte {
	data, err := files.ReadFile(name)
	if err != nil {
		panic("latentd/demo: " + name + " is not embedded") // a build defect, not input
	}
	return data
}

// PolicyJSON is the demonstration node policy, a fresh copy each call.
func PolicyJSON() []byte { return mustRead("policy.json") }

// CatalogJSON is the demonstration catalog file, a fresh copy each call.
func CatalogJSON() []byte { return mustRead("catalog.json") }

// TokensJSON is the demonstration token file (latentd.DecodeTokens reads
// it), a fresh copy each call.
func TokensJSON() []byte { return mustRead("tokens.json") }

// Guest is the demonstration guest's WebAssembly module, a fresh copy
// each call.
func Guest() []byte { return mustRead("hello.wasm") }

// GuestDigest is the hexadecimal SHA-256 digest of Guest, the name the
// catalog's artifact_digest gives it.
func GuestDigest() string {
	sum := sha256.Sum256(Guest())
	return hex.EncodeToString(sum[:])
}

// Policy decodes PolicyJSON.
func Policy() (*policy.NodeAdmissionPolicy, error) {
	p, err := policy.DecodePolicy(PolicyJSON())
	if err != nil {
		return nil, fmt.Errorf("the embedded policy:\n%w", err)
	}
	return p, nil
}

// Deployments decodes CatalogJSON and returns its deployments.
func Deployments() ([]catalog.Deployment, error) {
	f, err := catalog.DecodeCatalogFile(CatalogJSON(), true)
	if err != nil {
		return nil, fmt.Errorf("the embedded catalog: %w", err)
	}
	return f.Deployments, nil
}
