package core

import "latent.dev/admission/policy"

// unmetErrors is step 6's answer for each requirement a node may not
// meet ([policy.Requirements.Unmet]); nil when it meets them all.
var unmetErrors = [...]*rejection{
	policy.RequirementsMet:      nil,
	policy.RequiresBackend:      errBackend,
	policy.RequiresStateModel:   errStateModel,
	policy.RequiresThreading:    errThreading,
	policy.RequiresFeatures:     errFeatures,
	policy.RequiresArchitecture: errArchitecture,
	policy.RequiresRegion:       errRegion,
	policy.RequiresZone:         errZone,
}
