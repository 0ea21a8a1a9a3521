// Package decoders lets the module's own documents that embed a policy or
// catalog (the scenario files) decode them with the policy and catalog
// decoders, without those packages exporting functions whose signatures
// name the internal strictjson types. The policy and catalog packages set
// these in their init; anything that imports them may call these.
package decoders

import "latent.dev/admission/internal/strictjson"

var (
	// Policy decodes a node policy value; it returns a
	// *policy.NodeAdmissionPolicy.
	Policy func(d *strictjson.Decoder, v *strictjson.Value) any
	// Catalog decodes a catalog file value; it returns a catalog.File.
	Catalog func(d *strictjson.Decoder, v *strictjson.Value, requireCapacity bool) any
	// Deployment decodes one deployment value; it returns a
	// catalog.Deployment.
	Deployment func(d *strictjson.Decoder, v *strictjson.Value) any
)
