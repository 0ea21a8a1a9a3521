// Package trace is the format of a decision trace: what `latentd -record`
// writes and `admissionctl shadow` replays (docs/record-and-shadow.md).
//
// A trace is JSON lines, one [Line] each. The first line of every file is
// a header; after it come the lines in roughly the order they were
// written, each with its place in the node's one total order (Order).
// Lines reach the file out of order by at most the recorder's buffer,
// so a reader puts them back in order with a bounded window.
//
// A trace holds no token, no payload and no claim's value: a principal
// is its kind, subject, tenant and service, and a request is its
// metadata (activation ID, target and routing key, priority, budget,
// sizes).
package trace

// Version is the format's version, which a writer puts in each file's
// header. A reader reads it and every earlier one (version 1 had no
// "same"), and refuses any other.
const Version = 2

// The bounds of a payload (a catalog file, a deployment) and its lines.
const (
	// PartBytes is the most payload bytes one line carries: base64 makes
	// them 699,052 bytes, and the rest of the line is under 200, so every
	// line the recorder writes is under MaxLineBytes.
	PartBytes = 512 << 10
	// MaxPayloadBytes is the largest payload a [Reader] puts together
	// from parts: the largest catalog a node holds (its store's 1 GiB,
	// docs/catalog-store.md). The recorder writes a larger one as a
	// dropped line.
	MaxPayloadBytes = 1 << 30
)

// Split cuts a payload into the parts its lines carry: one part when it
// is at most PartBytes (an empty payload is one empty part).
func Split(payload []byte) [][]byte {
	if len(payload) <= PartBytes {
		return [][]byte{payload}
	}
	var parts [][]byte
	for len(payload) > 0 {
		n := min(len(payload), PartBytes)
		parts = append(parts, payload[:n:n])
		payload = payload[n:]
	}
	return parts
}

// The kinds of line.
const (
	KindHeader   = "header"   // the first line of every file
	KindCatalog  = "catalog"  // the whole catalog, once after the header of the first file
	KindDeploy   = "deploy"   // a deployment took effect
	KindUndeploy = "undeploy" // a deployment was deleted
	KindLoad     = "load"     // a load sample was published and accepted
	KindDecision = "decision" // one admission decision
	KindStart    = "start"    // a permit started execution, or found its deadline passed
	KindRelease  = "release"  // a permit's reservation was released (or reclaimed)
	KindDropped  = "dropped"  // lines were dropped because the buffer was full
	KindFleet    = "fleet"    // a fleet-limited tenant's slice was published or withdrawn
)

// Stages of a decision: who gave the answer.
const (
	// StageEdge: latentd answered before asking admission (an unknown
	// token, another tenant's path, a principal the policy does not
	// list, a route that resolves to nothing).
	StageEdge = "edge"
	// StageCore: admission answered.
	StageCore = "core"
)

// Answers besides core.Reason values.
const (
	AnswerAdmitted        = "admitted"
	AnswerUnauthenticated = "unauthenticated" // no token, or one the node does not know
)

// Line is one line of a trace. Kind says which of the embedded parts is
// set; the others are nil and left out of the JSON. No two parts share a
// JSON key (encoding/json would drop both).
type Line struct {
	Kind string `json:"k"`
	// Order is the line's place in the node's total order (the recording
	// provider's ledger order); 0 only on a header.
	Order uint64 `json:"order,omitempty"`
	// T is when the event happened: nanoseconds since the header's
	// StartUnixNano, measured on the monotonic clock. On a decision it is
	// the first clock reading (core.Inputs.First), or when the
	// line was made if the decision read no clock.
	T int64 `json:"t,omitempty"`

	*Header   `json:",omitempty"`
	*Catalog  `json:",omitempty"`
	*Change   `json:",omitempty"`
	*Load     `json:",omitempty"`
	*Decision `json:",omitempty"`
	*Move     `json:",omitempty"`
	*Dropped  `json:",omitempty"`
	*Fleet    `json:",omitempty"`

	// Owner, when set, is what the line's parts belong to: a [Writer]
	// hands it to WriterConfig.Recycle once it is done with the line. It
	// is never written, and a [Reader] leaves it nil.
	Owner any `json:"-"`
}

// Header opens every file of a trace.
type Header struct {
	Version int `json:"version"`
	// StartUnixNano is the wall time that T counts from.
	StartUnixNano int64 `json:"start_unix_ns"`
	// File counts the files of one recording from 0; a rotation starts
	// the next (docs: -record-max-bytes).
	File uint64 `json:"file"`
	// Policy is the SHA-256 (hex) of the node policy file in force.
	PolicySHA256 string `json:"policy_sha256"`
}

// Catalog is the catalog the recording started with, in the catalog
// file's JSON form (docs/catalog-format.md), and its generation.
//
// A catalog file longer than PartBytes is written in parts: Parts lines,
// Part 0 to Parts-1 in order, each with PartBytes of the file (the last
// with the rest) and the same Generation; a [Reader] hands out one line
// with the whole file once it has the last part. Parts is 0 (absent) on
// a catalog in one line.
type Catalog struct {
	Generation uint64 `json:"catalog_generation"`
	File       []byte `json:"catalog_json"` // base64 in JSON: the bytes are a catalog file
	Part       uint32 `json:"catalog_part,omitempty"`
	Parts      uint32 `json:"catalog_parts,omitempty"`
}

// Change is a deploy (Deployment set) or a delete (Tenant and Service
// set) that took effect, and the generation it made.
//
// A deployment longer than PartBytes is written in parts, as a catalog
// is (DeploymentPart, DeploymentParts).
type Change struct {
	Generation      uint64 `json:"generation"`
	Deployment      []byte `json:"deployment_json,omitempty"` // a deployment object, as PUT takes it
	Tenant          string `json:"tenant,omitempty"`
	Service         string `json:"service,omitempty"`
	DeploymentPart  uint32 `json:"deployment_part,omitempty"`
	DeploymentParts uint32 `json:"deployment_parts,omitempty"`
}

// Load is an accepted load sample. Decisions refer to it by Sequence.
type Load struct {
	Sequence uint64 `json:"sequence"`
	// ObservedT is its observation time, in T's units (it may be
	// negative: observed before the recording began).
	ObservedT      int64   `json:"observed_t"`
	CPUPressure    float64 `json:"cpu_pressure"`
	MemoryPressure float64 `json:"memory_pressure"`
	// QueueDelayNS is the queue delay per cell class, in the order of
	// policy.CellClass.
	QueueDelayNS []int64 `json:"queue_delay_ns"`
}

// Principal is an authenticated caller, without its token or claims.
type Principal struct {
	Kind    string `json:"kind"` // policy.PrincipalKind's name
	Subject string `json:"subject"`
	Tenant  string `json:"tenant"`
	Service string `json:"service,omitempty"`
	Admin   bool   `json:"admin,omitempty"`
}

// Target is the invocation path's tenant, service and route.
type Target struct {
	Tenant  string `json:"tenant"`
	Service string `json:"service"`
	Route   string `json:"route"`
}

// Revision is a resolved revision's identity.
type Revision struct {
	Tenant   string `json:"tenant"`
	Service  string `json:"service"`
	Route    string `json:"route"`
	Contract string `json:"contract"`
	Function string `json:"function"`
	Revision string `json:"revision"`
	Release  string `json:"release"`
}

// Budget is the requested budget.
type Budget struct {
	CPUFuel     uint64 `json:"cpu_fuel"`
	MemoryBytes uint64 `json:"memory_bytes"`
	// WallTimeNS is the requested wall time, when the request set one.
	WallTimeNS *int64 `json:"wall_time_ns,omitempty"`
}

// Decision is one admission decision and everything it depended on.
type Decision struct {
	Stage string `json:"stage"`
	// Same names the parts the line leaves out because they equal the
	// same part of the last decision line before it in the same file
	// that had it (in full or by Same): SamePrincipal, SameTarget,
	// SameBudget. Only a Writer sets it, and a Reader puts the parts
	// back and hands the line out with Same zero.
	Same uint8 `json:"same,omitempty"`
	// Principal is nil when the request carried no token the node knows.
	Principal *Principal `json:"principal,omitempty"`
	Target    Target     `json:"target"`
	// RoutingKey is the Latent-Routing-Key the route was resolved with
	// (a replay resolves the target again with it).
	RoutingKey string `json:"routing_key,omitempty"`
	// Revision is what the route resolved to, as recordings before
	// this field was left out wrote it; a reader still reads it. A
	// recorder now leaves it nil: the target and routing key resolve to
	// it in the pin generation, which is what a replay does, so the
	// line need not repeat it (a third of a decision and its release).
	Revision *Revision `json:"revision,omitempty"`
	// Generation is the catalog generation the request was resolved in.
	Generation     uint64 `json:"pin_generation,omitempty"`
	ActivationID   string `json:"activation_id,omitempty"`
	Priority       uint32 `json:"priority"`
	Budget         Budget `json:"budget"`
	PayloadBytes   uint64 `json:"payload_bytes"`
	DeadlineUnixMS *int64 `json:"deadline_unix_ms,omitempty"`
	// Clock: T is the decision's own first clock reading (it got past
	// step 10). Committed: it reached the commit (step 13).
	Clock     bool `json:"clock,omitempty"`
	Committed bool `json:"committed,omitempty"`
	// Fleet is the fleet slice the commit judged (core.FleetReading), for
	// a fleet-limited tenant's decision that reached the fleet check.
	Fleet *FleetReading `json:"fleet,omitempty"`
	// Since are the monotonic readings after T, by label: step 12's
	// resample (core.Inputs.Step12Since) when it was taken, then the
	// commit's (core.Inputs.CommitSince) when Committed
	// (internal/coretrace reads and writes them).
	Since []int64 `json:"since_ns,omitempty"`
	// LoadSequence and CommitLoadSequence name the samples step 12 and
	// the commit judged; 0 is none.
	LoadSequence       uint64 `json:"load,omitempty"`
	CommitLoadSequence uint64 `json:"commit_load,omitempty"`
	// Answer is AnswerAdmitted, AnswerUnauthenticated or a core.Reason;
	// Scope and Dimension are the rejection's (core.Error).
	Answer    string `json:"answer"`
	Scope     string `json:"scope,omitempty"`
	Dimension string `json:"dimension,omitempty"`
}

// The parts a decision line may leave out (Decision.Same): a node's
// decisions repeat them, and a third of the bytes of a decision and its
// release was them.
const (
	SamePrincipal uint8 = 1 << iota
	SameTarget
	SameBudget
	sameParts = SamePrincipal | SameTarget | SameBudget
)

// Move is a start or a release of the permit admitted at order Of.
type Move struct {
	Of uint64 `json:"of"`
	// ElapsedNS is the time from the admission's T to the move: for a
	// release, the activation's duration.
	ElapsedNS int64 `json:"elapsed_ns"`
	// Refused: a start that found the deadline passed (and released);
	// Reclaimed: a release of a permit that leaked.
	Refused   bool `json:"refused,omitempty"`
	Reclaimed bool `json:"reclaimed,omitempty"`
}

// Dropped counts lines the recorder could not write because its buffer
// was full, since the last such line. A trace with one cannot be
// replayed exactly.
type Dropped struct {
	Lines uint64 `json:"dropped_lines"`
}

// Fleet is a publish or a withdrawal of a fleet-limited tenant's slice
// (docs/fleet.md): its order is drawn before the write, as a load
// sample's is, so every decision that judges it comes after its line.
type Fleet struct {
	Tenant string `json:"fleet_tenant"`
	// Published: a slice valid until ValidUntilT (ns since the header's
	// StartUnixNano, on the monotonic clock); false: withdrawn.
	Published   bool  `json:"fleet_published,omitempty"`
	Slice       int64 `json:"fleet_slice,omitempty"`
	ValidUntilT int64 `json:"fleet_valid_until_t,omitempty"`
	// Writes is the tenant's count of slice writes with this one
	// (core.FleetReading.Writes counts the same way).
	Writes uint64 `json:"fleet_writes"`
}

// FleetReading is what a decision's commit read of its tenant's slice
// (core.FleetReading).
type FleetReading struct {
	Published   bool   `json:"published,omitempty"`
	Slice       int64  `json:"slice,omitempty"`
	RemainingNS int64  `json:"remaining_ns"`
	Writes      uint64 `json:"writes"`
}
