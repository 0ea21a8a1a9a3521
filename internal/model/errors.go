package model

import "fmt"

// Rejection is the model's answer when it refuses something: the same five
// fields as a core error, spelled out from the decision table. Unlike
// core, the model builds a fresh value (and its text) for every rejection.
type Rejection struct {
	Code      string
	Scope     string
	Dimension string
	Reason    string
	Retryable bool

	err error // built with fmt.Errorf when the rejection is made
}

// Error prints the detail in the admission.limit format.
func (r *Rejection) Error() string { return r.err.Error() }

// reject builds a rejection the obvious way: a fresh value and a
// fmt.Errorf text for every refusal. This is the naive implementation's
// error cost that the benchmarks compare core's preallocated errors with.
func reject(code, scope, dimension, reason string, retryable bool) *Rejection {
	return &Rejection{Code: code, Scope: scope, Dimension: dimension, Reason: reason, Retryable: retryable,
		err: fmt.Errorf("admission.limit: %s scope=%s dimension=%s reason=%s retryable=%t",
			code, scope, dimension, reason, retryable)}
}

// Rows of the decision table that the model builds rejections from.

func invalidIdentifier(scope, dimension string) *Rejection {
	return reject("invalid-argument", scope, dimension, "identifier-invalid", false)
}

func metadataTooLarge(dimension string) *Rejection {
	return reject("invalid-argument", "request", dimension, "metadata-too-large", false)
}

func unsupportedBudgetDimension(dimension string) *Rejection {
	return reject("invalid-argument", "request", dimension, "budget-dimension-unsupported", false)
}

func principalNotAuthorized() *Rejection {
	return reject("permission-denied", "principal", "identity", "principal-not-authorized", false)
}

func priorityNotAuthorized(scope string) *Rejection {
	return reject("permission-denied", scope, "priority", "priority-not-authorized", false)
}

func revisionNotAvailable() *Rejection {
	return reject("admission-rejected", "revision", "revision", "revision-not-available", false)
}

func unsupportedRequirement(dimension string) *Rejection {
	return reject("admission-rejected", "revision", dimension, "unsupported-execution-requirement", false)
}

func placementNotCompatible(dimension string) *Rejection {
	return reject("admission-rejected", "placement", dimension, "placement-not-compatible", false)
}

func trustClassNotAuthorized() *Rejection {
	return reject("permission-denied", "tenant", "trust-class", "trust-class-not-authorized", false)
}

func budgetInfeasible(dimension string) *Rejection {
	return reject("admission-rejected", "request", dimension, "budget-infeasible", false)
}

func noCompatibleCell() *Rejection {
	return reject("admission-rejected", "cell-class", "memory-bytes", "no-compatible-cell", false)
}

func cellClassNotAuthorized(scope string) *Rejection {
	return reject("permission-denied", scope, "cell-class", "cell-class-not-authorized", false)
}

func payloadTooLarge(scope string) *Rejection {
	return reject("resource-exhausted", scope, "payload-bytes", "payload-too-large", false)
}

func deadlineExceeded() *Rejection {
	return reject("deadline-exceeded", "request", "deadline", "deadline-exceeded", false)
}

func loadUnavailable() *Rejection {
	return reject("unavailable", "load", "load-sample", "load-unavailable", true)
}

func nodeOverloaded(dimension string) *Rejection {
	return reject("resource-exhausted", "node", dimension, "node-overloaded", true)
}

func activationIDUnavailable() *Rejection {
	return reject("already-exists", "request", "activation-id", "activation-id-unavailable", false)
}

func capacityExhausted(scope, dimension string, retryable bool) *Rejection {
	return reject("resource-exhausted", scope, dimension, "capacity-exhausted", retryable)
}

func queueDeadlineInfeasible(retryable bool) *Rejection {
	return reject("admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", retryable)
}

func permitDeadlineExceeded() *Rejection {
	return reject("deadline-exceeded", "permit", "deadline", "deadline-exceeded", false)
}

func permitNotLive() *Rejection {
	return reject("failed-precondition", "permit", "permit", "permit-not-live", false)
}

func loadSampleRejected() *Rejection {
	return reject("invalid-argument", "load", "load-sample", "load-sample-rejected", false)
}

func fleetUnavailable() *Rejection {
	return reject("unavailable", "fleet", "fleet-slice", "fleet-unavailable", true)
}

func fleetSliceRejected() *Rejection {
	return reject("invalid-argument", "fleet", "fleet-slice", "fleet-slice-rejected", false)
}
