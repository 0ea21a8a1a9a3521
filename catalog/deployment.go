package catalog

import "latent.dev/admission/policy"

// Capacity bounds what a catalog retains: the number of revisions and the
// summed size of their policy records (see [RecordSize]).
type Capacity struct {
	MaxRevisions   uint64
	MaxPolicyBytes uint64
}

// GenerousCapacity is the capacity of a scenario catalog that names none.
var GenerousCapacity = Capacity{MaxRevisions: 1 << 20, MaxPolicyBytes: 1 << 30}

// CapacityUse is what a catalog's deployments hold against its capacity.
type CapacityUse struct {
	Revisions   uint64
	PolicyBytes uint64
}

// Release names the artifact a revision runs. The catalog keeps only this
// metadata, never the artifact.
type Release struct {
	ArtifactDigest string
	Version        string
}

// Revision is one weighted revision of a route, as an operator deploys it.
type Revision struct {
	Release Release
	Weight  uint64
	Policy  policy.RevisionPolicy
}

// Route is one named entry point of a deployment.
type Route struct {
	Name      string
	Contract  string
	Function  string
	Revisions []Revision
}

// Deployment is everything one (tenant, service) pair serves. Deploying it
// again replaces the previous deployment of the pair as a whole.
type Deployment struct {
	Tenant  string
	Service string
	Routes  []Route
}

// File is a decoded catalog file (docs/catalog-format.md).
type File struct {
	Capacity    Capacity
	Deployments []Deployment
}

// DeploymentKey names a deployment: exact bytes, no folding.
type DeploymentKey struct {
	Tenant  string
	Service string
}

// Target is what an adapter asks the resolver for.
type Target struct {
	Tenant  string
	Service string
	Route   string
}

// MaxNameBytes bounds caller-chosen names (tenant, service, route, ...)
// when no node policy is at hand; a node policy's own, usually smaller,
// maximum_identifier_bytes is checked against the node policy when a catalog file is validated for a node.
const MaxNameBytes = 255
