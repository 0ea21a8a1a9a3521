package core

import (
	"latent.dev/admission/core/atomicledger"
)

// Code is the platform error code of a rejection.
type Code string

// The codes.
const (
	CodeInvalidArgument    Code = "invalid-argument"
	CodePermissionDenied   Code = "permission-denied"
	CodeAdmissionRejected  Code = "admission-rejected"
	CodeResourceExhausted  Code = "resource-exhausted"
	CodeDeadlineExceeded   Code = "deadline-exceeded"
	CodeUnavailable        Code = "unavailable"
	CodeAlreadyExists      Code = "already-exists"
	CodeFailedPrecondition Code = "failed-precondition"
)

// Scope is where a limit applies.
type Scope string

// The scopes.
const (
	ScopeRequest    Scope = "request"
	ScopePrincipal  Scope = "principal"
	ScopeRevision   Scope = "revision"
	ScopeNode       Scope = "node"
	ScopeTenant     Scope = "tenant"
	ScopePlacement  Scope = "placement"
	ScopeCellClass  Scope = "cell-class"
	ScopeTrustClass Scope = "trust-class"
	ScopeQueueClass Scope = "queue-class"
	ScopeLoad       Scope = "load"
	ScopePermit     Scope = "permit"
	// ScopeFleet is the node's slice of a fleet-wide tenant limit.
	ScopeFleet Scope = "fleet"
)

// Dimension is the limited quantity or field.
type Dimension string

// The dimensions.
const (
	DimMetadataEntries    Dimension = "metadata-entries"
	DimMetadataBytes      Dimension = "metadata-bytes"
	DimActivationID       Dimension = "activation-id"
	DimSubject            Dimension = "subject"
	DimTenant             Dimension = "tenant"
	DimService            Dimension = "service"
	DimRoute              Dimension = "route"
	DimContract           Dimension = "contract"
	DimFunction           Dimension = "function"
	DimRevisionID         Dimension = "revision-id"
	DimReleaseID          Dimension = "release-id"
	DimNetworkEgressBytes Dimension = "network-egress-bytes"
	DimStorageBytes       Dimension = "storage-bytes"
	DimOutboundCalls      Dimension = "outbound-calls"
	DimIdentity           Dimension = "identity"
	DimPriority           Dimension = "priority"
	DimRevision           Dimension = "revision"
	DimBackend            Dimension = "backend"
	DimStateModel         Dimension = "state-model"
	DimThreading          Dimension = "threading"
	DimFeatures           Dimension = "features"
	DimArchitecture       Dimension = "architecture"
	DimRegion             Dimension = "region"
	DimZone               Dimension = "zone"
	DimTrustClass         Dimension = "trust-class"
	DimCPUFuel            Dimension = "cpu-fuel"
	DimMemoryBytes        Dimension = "memory-bytes"
	DimWallTime           Dimension = "wall-time"
	DimCellClass          Dimension = "cell-class"
	DimPayloadBytes       Dimension = "payload-bytes"
	DimDeadline           Dimension = "deadline"
	DimLoadSample         Dimension = "load-sample"
	DimCPUPressure        Dimension = "cpu-pressure"
	DimMemoryPressure     Dimension = "memory-pressure"
	DimLiveActivations    Dimension = "live-activations"
	DimQueuedReservations Dimension = "queued-reservations"
	DimQueueDelay         Dimension = "queue-delay"
	DimPermit             Dimension = "permit"
	// DimFleetSlice is the published slice itself: missing, expired or
	// malformed.
	DimFleetSlice Dimension = "fleet-slice"
)

// Reason is the stable, machine-readable cause of a rejection.
type Reason string

// The reasons, in decision-table order.
const (
	ReasonMetadataTooLarge                Reason = "metadata-too-large"
	ReasonIdentifierInvalid               Reason = "identifier-invalid"
	ReasonBudgetDimensionUnsupported      Reason = "budget-dimension-unsupported"
	ReasonPrincipalNotAuthorized          Reason = "principal-not-authorized"
	ReasonPriorityNotAuthorized           Reason = "priority-not-authorized"
	ReasonRevisionNotAvailable            Reason = "revision-not-available"
	ReasonUnsupportedExecutionRequirement Reason = "unsupported-execution-requirement"
	ReasonPlacementNotCompatible          Reason = "placement-not-compatible"
	ReasonTrustClassNotAuthorized         Reason = "trust-class-not-authorized"
	ReasonBudgetInfeasible                Reason = "budget-infeasible"
	ReasonNoCompatibleCell                Reason = "no-compatible-cell"
	ReasonCellClassNotAuthorized          Reason = "cell-class-not-authorized"
	ReasonPayloadTooLarge                 Reason = "payload-too-large"
	ReasonDeadlineExceeded                Reason = "deadline-exceeded"
	ReasonLoadUnavailable                 Reason = "load-unavailable"
	ReasonNodeOverloaded                  Reason = "node-overloaded"
	ReasonActivationIDUnavailable         Reason = "activation-id-unavailable"
	ReasonCapacityExhausted               Reason = "capacity-exhausted"
	ReasonFleetUnavailable                Reason = "fleet-unavailable"
	ReasonQueueDeadlineInfeasible         Reason = "queue-deadline-infeasible"
	ReasonPermitNotLive                   Reason = "permit-not-live"
	ReasonLoadSampleRejected              Reason = "load-sample-rejected"
	ReasonFleetSliceRejected              Reason = "fleet-slice-rejected"
)

// reasons lists every reason in decision-table order.
var reasons = [...]Reason{
	ReasonMetadataTooLarge, ReasonIdentifierInvalid, ReasonBudgetDimensionUnsupported,
	ReasonPrincipalNotAuthorized, ReasonPriorityNotAuthorized, ReasonRevisionNotAvailable,
	ReasonUnsupportedExecutionRequirement, ReasonPlacementNotCompatible, ReasonTrustClassNotAuthorized,
	ReasonBudgetInfeasible, ReasonNoCompatibleCell, ReasonCellClassNotAuthorized,
	ReasonPayloadTooLarge, ReasonDeadlineExceeded, ReasonLoadUnavailable, ReasonNodeOverloaded,
	ReasonActivationIDUnavailable, ReasonCapacityExhausted, ReasonFleetUnavailable, ReasonQueueDeadlineInfeasible,
	ReasonPermitNotLive, ReasonLoadSampleRejected, ReasonFleetSliceRejected,
}

// Reasons returns every reason in decision-table order, as a copy.
func Reasons() []Reason { return append([]Reason(nil), reasons[:]...) }

// Error is a structured admission failure: one admission.limit detail.
// It is a small value that refers to one row of a table built before the
// first request, so returning one allocates nothing and no caller can
// change what another caller sees: the fields are read through methods,
// and every field and the text come from the fixed vocabulary above (no
// identifier, tenant, subject, attribute, number or load reading ever
// appears in one). Find it with errors.As into a core.Error, or compare
// it with == or errors.Is against another Error. The zero Error is no
// row; its accessors answer zero values.
type Error struct{ r *rejection }

// rejection is one row of the error table; never modified after init.
type rejection struct {
	code      Code
	scope     Scope
	dimension Dimension
	reason    Reason
	retryable bool
	index     uint8 // position in allErrors, which indexes the counters
	text      string
}

// Code is the platform error code.
func (e Error) Code() Code {
	if e.r == nil {
		return ""
	}
	return e.r.code
}

// Scope is where the limit applies.
func (e Error) Scope() Scope {
	if e.r == nil {
		return ""
	}
	return e.r.scope
}

// Dimension is the limited quantity or field.
func (e Error) Dimension() Dimension {
	if e.r == nil {
		return ""
	}
	return e.r.dimension
}

// Reason is the stable, machine-readable cause.
func (e Error) Reason() Reason {
	if e.r == nil {
		return ""
	}
	return e.r.reason
}

// Retryable reports whether the same request can succeed later without
// changes (capacity frees up, load falls, a queue drains).
func (e Error) Retryable() bool { return e.r != nil && e.r.retryable }

// Error prints the detail, for example
// "admission.limit: resource-exhausted scope=tenant dimension=queued-reservations reason=capacity-exhausted retryable=true".
func (e Error) Error() string {
	if e.r == nil {
		return "admission.limit: unknown"
	}
	return e.r.text
}

// err is the public value of a table row.
func (r *rejection) err() Error { return Error{r} }

var allErrors []*rejection

func newError(code Code, scope Scope, dim Dimension, reason Reason, retryable bool) *rejection {
	e := &rejection{code: code, scope: scope, dimension: dim, reason: reason, retryable: retryable,
		index: uint8(len(allErrors))}
	retry := "false"
	if retryable {
		retry = "true"
	}
	e.text = "admission.limit: " + string(code) + " scope=" + string(scope) + " dimension=" + string(dim) +
		" reason=" + string(reason) + " retryable=" + retry
	allErrors = append(allErrors, e)
	return e
}

// AllErrors returns every error the package can return, in table order
// (the order of [Metrics.Rejected]).
func AllErrors() []Error {
	out := make([]Error, len(allErrors))
	for i, r := range allErrors {
		out[i] = r.err()
	}
	return out
}

// Rejections that do not depend on the ledger, by decision-table row.
var (
	errMetadataEntries = newError(CodeInvalidArgument, ScopeRequest, DimMetadataEntries, ReasonMetadataTooLarge, false)
	errMetadataBytes   = newError(CodeInvalidArgument, ScopeRequest, DimMetadataBytes, ReasonMetadataTooLarge, false)

	errActivationID       = newError(CodeInvalidArgument, ScopeRequest, DimActivationID, ReasonIdentifierInvalid, false)
	errPrincipalSubject   = newError(CodeInvalidArgument, ScopePrincipal, DimSubject, ReasonIdentifierInvalid, false)
	errPrincipalTenant    = newError(CodeInvalidArgument, ScopePrincipal, DimTenant, ReasonIdentifierInvalid, false)
	errPrincipalService   = newError(CodeInvalidArgument, ScopePrincipal, DimService, ReasonIdentifierInvalid, false)
	errRevisionTenant     = newError(CodeInvalidArgument, ScopeRevision, DimTenant, ReasonIdentifierInvalid, false)
	errRevisionService    = newError(CodeInvalidArgument, ScopeRevision, DimService, ReasonIdentifierInvalid, false)
	errRevisionRoute      = newError(CodeInvalidArgument, ScopeRevision, DimRoute, ReasonIdentifierInvalid, false)
	errRevisionContract   = newError(CodeInvalidArgument, ScopeRevision, DimContract, ReasonIdentifierInvalid, false)
	errRevisionFunction   = newError(CodeInvalidArgument, ScopeRevision, DimFunction, ReasonIdentifierInvalid, false)
	errRevisionID         = newError(CodeInvalidArgument, ScopeRevision, DimRevisionID, ReasonIdentifierInvalid, false)
	errReleaseID          = newError(CodeInvalidArgument, ScopeRevision, DimReleaseID, ReasonIdentifierInvalid, false)
	errNetworkEgress      = newError(CodeInvalidArgument, ScopeRequest, DimNetworkEgressBytes, ReasonBudgetDimensionUnsupported, false)
	errStorage            = newError(CodeInvalidArgument, ScopeRequest, DimStorageBytes, ReasonBudgetDimensionUnsupported, false)
	errOutboundCalls      = newError(CodeInvalidArgument, ScopeRequest, DimOutboundCalls, ReasonBudgetDimensionUnsupported, false)
	errPrincipalDenied    = newError(CodePermissionDenied, ScopePrincipal, DimIdentity, ReasonPrincipalNotAuthorized, false)
	errNodePriority       = newError(CodePermissionDenied, ScopeNode, DimPriority, ReasonPriorityNotAuthorized, false)
	errTenantPriority     = newError(CodePermissionDenied, ScopeTenant, DimPriority, ReasonPriorityNotAuthorized, false)
	errRevisionMissing    = newError(CodeAdmissionRejected, ScopeRevision, DimRevision, ReasonRevisionNotAvailable, false)
	errBackend            = newError(CodeAdmissionRejected, ScopeRevision, DimBackend, ReasonUnsupportedExecutionRequirement, false)
	errStateModel         = newError(CodeAdmissionRejected, ScopeRevision, DimStateModel, ReasonUnsupportedExecutionRequirement, false)
	errThreading          = newError(CodeAdmissionRejected, ScopeRevision, DimThreading, ReasonUnsupportedExecutionRequirement, false)
	errFeatures           = newError(CodeAdmissionRejected, ScopeRevision, DimFeatures, ReasonUnsupportedExecutionRequirement, false)
	errArchitecture       = newError(CodeAdmissionRejected, ScopePlacement, DimArchitecture, ReasonPlacementNotCompatible, false)
	errRegion             = newError(CodeAdmissionRejected, ScopePlacement, DimRegion, ReasonPlacementNotCompatible, false)
	errZone               = newError(CodeAdmissionRejected, ScopePlacement, DimZone, ReasonPlacementNotCompatible, false)
	errTrustClass         = newError(CodePermissionDenied, ScopeTenant, DimTrustClass, ReasonTrustClassNotAuthorized, false)
	errZeroFuel           = newError(CodeAdmissionRejected, ScopeRequest, DimCPUFuel, ReasonBudgetInfeasible, false)
	errZeroMemory         = newError(CodeAdmissionRejected, ScopeRequest, DimMemoryBytes, ReasonBudgetInfeasible, false)
	errZeroWallTime       = newError(CodeAdmissionRejected, ScopeRequest, DimWallTime, ReasonBudgetInfeasible, false)
	errNoCompatibleCell   = newError(CodeAdmissionRejected, ScopeCellClass, DimMemoryBytes, ReasonNoCompatibleCell, false)
	errTenantCellClass    = newError(CodePermissionDenied, ScopeTenant, DimCellClass, ReasonCellClassNotAuthorized, false)
	errTrustCellClass     = newError(CodePermissionDenied, ScopeTrustClass, DimCellClass, ReasonCellClassNotAuthorized, false)
	errNodePayload        = newError(CodeResourceExhausted, ScopeNode, DimPayloadBytes, ReasonPayloadTooLarge, false)
	errTenantPayload      = newError(CodeResourceExhausted, ScopeTenant, DimPayloadBytes, ReasonPayloadTooLarge, false)
	errDeadlineExceeded   = newError(CodeDeadlineExceeded, ScopeRequest, DimDeadline, ReasonDeadlineExceeded, false)
	errLoadUnavailable    = newError(CodeUnavailable, ScopeLoad, DimLoadSample, ReasonLoadUnavailable, true)
	errCPUOverloaded      = newError(CodeResourceExhausted, ScopeNode, DimCPUPressure, ReasonNodeOverloaded, true)
	errMemoryOverloaded   = newError(CodeResourceExhausted, ScopeNode, DimMemoryPressure, ReasonNodeOverloaded, true)
	errDuplicate          = newError(CodeAlreadyExists, ScopeRequest, DimActivationID, ReasonActivationIDUnavailable, false)
	errQueueInfeasible    = newError(CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, true)
	errQueueNeverFeasible = newError(CodeAdmissionRejected, ScopeCellClass, DimQueueDelay, ReasonQueueDeadlineInfeasible, false)
	errPermitDeadline     = newError(CodeDeadlineExceeded, ScopePermit, DimDeadline, ReasonDeadlineExceeded, false)
	errPermitNotLive      = newError(CodeFailedPrecondition, ScopePermit, DimPermit, ReasonPermitNotLive, false)
	errLoadRejected       = newError(CodeInvalidArgument, ScopeLoad, DimLoadSample, ReasonLoadSampleRejected, false)
)

// ErrLoadSampleRejected is returned by [NodeLoadState.Publish] for a
// sample that is malformed or out of order; the node then fails closed
// until a valid newer sample arrives.
var ErrLoadSampleRejected = errLoadRejected.err()

// ErrPermitDeadlineExceeded is returned by EnsureSchedulableAt and
// StartExecution at or after the permit's deadline (a failed
// StartExecution has released the permit).
var ErrPermitDeadlineExceeded = errPermitDeadline.err()

// ErrPermitNotLive is returned for a permit that was released, consumed
// or never issued.
var ErrPermitNotLive = errPermitNotLive.err()

// capacityErrors[scope][dimension][permanent] are the capacity-exhausted
// errors; retryable unless the reservation could not fit an empty scope.
var capacityErrors = func() (t [5][4][2]*rejection) {
	scopes := [...]Scope{atomicledger.NodeScope: ScopeNode, atomicledger.TenantScope: ScopeTenant,
		atomicledger.TrustClassScope: ScopeTrustClass, atomicledger.QueueClassScope: ScopeQueueClass}
	dims := [...]Dimension{atomicledger.LiveActivations: DimLiveActivations, atomicledger.QueuedReservations: DimQueuedReservations,
		atomicledger.CPUFuel: DimCPUFuel, atomicledger.MemoryBytes: DimMemoryBytes}
	for s := atomicledger.NodeScope; s <= atomicledger.QueueClassScope; s++ {
		for d := range dims {
			if s == atomicledger.QueueClassScope && atomicledger.Dimension(d) != atomicledger.QueuedReservations {
				continue
			}
			t[s][d][0] = newError(CodeResourceExhausted, scopes[s], dims[d], ReasonCapacityExhausted, true)
			t[s][d][1] = newError(CodeResourceExhausted, scopes[s], dims[d], ReasonCapacityExhausted, false)
		}
	}
	return t
}()

func capacityError(s atomicledger.Shortfall) *rejection {
	permanent := 0
	if s.Permanent {
		permanent = 1
	}
	return capacityErrors[s.Scope][s.Dimension][permanent]
}

// The fleet scope's rows (step 13, after the tenant scope), declared after
// the capacity table so that every earlier row keeps its index. A full
// slice is always retryable: a slice can grow, and the tenant's own
// activations end. A missing or expired slice is retryable: the broker
// publishes a new one.
var (
	errFleetFull          = newError(CodeResourceExhausted, ScopeFleet, DimLiveActivations, ReasonCapacityExhausted, true)
	errFleetUnavailable   = newError(CodeUnavailable, ScopeFleet, DimFleetSlice, ReasonFleetUnavailable, true)
	errFleetSliceRejected = newError(CodeInvalidArgument, ScopeFleet, DimFleetSlice, ReasonFleetSliceRejected, false)
)

// ErrFleetSliceRejected is returned by [LocalQuotaProvider.PublishFleetSlice]
// for a slice it refuses: a tenant the policy does not mark fleet-limited
// (or does not configure), a negative slice, or a deadline out of range.
// A refused slice of a marked tenant withdraws the one it had, so the
// tenant fails closed until a valid slice is published.
var ErrFleetSliceRejected = errFleetSliceRejected.err()

// ErrRevisionNotAvailable is the rejection for a revision the pinned view
// does not hold. An adapter whose route resolution finds nothing answers
// it too, so that a missing route and a forged revision look the same.
var ErrRevisionNotAvailable = errRevisionMissing.err()
