package latentd

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"latent.dev/admission/core"
	"latent.dev/admission/node/runner"
	"latent.dev/admission/node/scheduler"
)

// StatusFor is the HTTP status of an admission rejection (the status
// table of docs/latentd.md): reasons that name their own status first,
// then the code.
func StatusFor(e core.Error) int {
	switch e.Reason() {
	case core.ReasonRevisionNotAvailable:
		return http.StatusNotFound
	case core.ReasonPayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case core.ReasonCapacityExhausted:
		return http.StatusTooManyRequests
	case core.ReasonNodeOverloaded:
		return http.StatusServiceUnavailable
	}
	switch e.Code() {
	case core.CodeInvalidArgument:
		return http.StatusBadRequest
	case core.CodePermissionDenied:
		return http.StatusForbidden
	case core.CodeAlreadyExists:
		return http.StatusConflict
	case core.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case core.CodeUnavailable:
		return http.StatusServiceUnavailable
	case core.CodeAdmissionRejected:
		if e.Retryable() {
			return http.StatusServiceUnavailable
		}
		return http.StatusUnprocessableEntity
	}
	// failed-precondition (a permit that is not live) and anything newer:
	// the node, not the caller, went wrong.
	return http.StatusInternalServerError
}

// rejectionBody is the JSON body of a rejection: exactly the five fields
// of the vocabulary, nothing from the request.
type rejectionBody struct {
	Code      core.Code      `json:"code"`
	Scope     core.Scope     `json:"scope"`
	Dimension core.Dimension `json:"dimension"`
	Reason    core.Reason    `json:"reason"`
	Retryable bool           `json:"retryable"`
}

// edgeErrorBody is the body of an answer the edge gives before or around
// admission: a fixed message, and the header or path it is about.
type edgeErrorBody struct {
	Error  string `json:"error"`
	Header string `json:"header,omitempty"`
	Path   string `json:"path,omitempty"`
}

// writeJSON writes v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"encoding the answer failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// reject writes a rejection: its status, the five-field body, and
// Retry-After exactly when it is retryable.
func (n *Node) reject(w http.ResponseWriter, e core.Error) {
	noteOf(w).reason = e.Reason()
	if e.Retryable() {
		w.Header().Set("Retry-After", strconv.FormatUint(uint64(n.retryAfter(e.Reason())), 10))
	}
	if StatusFor(e) == http.StatusRequestEntityTooLarge {
		// The rest of the body is never read: say the connection ends.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, StatusFor(e), rejectionBody{Code: e.Code(), Scope: e.Scope(), Dimension: e.Dimension(), Reason: e.Reason(), Retryable: e.Retryable()})
}

// retryAfter is the configured Retry-After of reason, in whole seconds.
func (n *Node) retryAfter(r core.Reason) uint32 {
	if s, ok := n.cfg.RetryAfter[r]; ok {
		return s
	}
	return DefaultRetryAfterSeconds
}

// edgeError writes an edge answer that is not an admission rejection.
func edgeError(w http.ResponseWriter, status int, body edgeErrorBody) {
	writeJSON(w, status, body)
}

// unauthorized is the answer to a missing or unknown token.
func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="latentd"`)
	edgeError(w, http.StatusUnauthorized, edgeErrorBody{Error: "missing or unknown bearer token", Header: "Authorization"})
}

// Outcome header values (Latent-Outcome), one per way an admitted
// activation can end; the same words as latent_node_activations_total.
const (
	OutcomeSuccess         = "success"
	OutcomeDeclaredError   = "declared-error"
	OutcomeTrap            = "trap"
	OutcomeDeadline        = "deadline"
	OutcomeFuel            = "fuel"
	OutcomeMemory          = "memory"
	OutcomeCanceled        = "canceled"
	OutcomePlatformFailure = "platform-failure"
)

// outcomeAnswer is the status and Latent-Outcome of an executed
// activation's outcome.
func outcomeAnswer(o runner.Outcome) (int, string) {
	switch o {
	case runner.Succeeded:
		return http.StatusOK, OutcomeSuccess
	case runner.DeclaredError:
		return http.StatusUnprocessableEntity, OutcomeDeclaredError
	case runner.Trapped:
		return http.StatusBadGateway, OutcomeTrap
	case runner.MemoryExhausted:
		return http.StatusBadGateway, OutcomeMemory
	case runner.FuelExhausted:
		return http.StatusBadGateway, OutcomeFuel
	case runner.DeadlineExceeded:
		return http.StatusGatewayTimeout, OutcomeDeadline
	case runner.Canceled:
		return http.StatusServiceUnavailable, OutcomeCanceled
	}
	return http.StatusInternalServerError, OutcomePlatformFailure
}

// zeroReport is the report of an activation that never ran.
var zeroReport runner.Report

// answerAfterAdmission writes what became of an admitted activation: its
// outcome, or the scheduler's reason for never running it.
func (n *Node) answerAfterAdmission(w http.ResponseWriter, report runner.Report, err error) {
	var rejection core.Error
	switch {
	case errors.As(err, &rejection):
		n.reject(w, rejection)
		return
	case errors.Is(err, scheduler.ErrQueueFull):
		n.reject(w, core.ErrQueueClassFull)
		return
	case errors.Is(err, scheduler.ErrExpired):
		setOutcome(w, OutcomeDeadline)
		n.reject(w, core.ErrPermitDeadlineExceeded)
		return
	case errors.Is(err, scheduler.ErrClosed):
		w.Header().Set("Retry-After", strconv.FormatUint(uint64(DefaultRetryAfterSeconds), 10))
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the node is shutting down"})
		return
	case errors.Is(err, scheduler.ErrCanceled):
		setOutcome(w, OutcomeCanceled)
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "canceled while queued"})
		return
	case report.Outcome == runner.NotRun:
		setOutcome(w, OutcomePlatformFailure)
		edgeError(w, http.StatusInternalServerError, edgeErrorBody{Error: "the activation could not be run"})
		return
	}
	status, outcome := outcomeAnswer(report.Outcome)
	setOutcome(w, outcome)
	switch report.Outcome {
	case runner.Succeeded, runner.DeclaredError:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(report.Output)))
		w.WriteHeader(status)
		_, _ = w.Write(report.Output)
	default:
		edgeError(w, status, edgeErrorBody{Error: "the activation ended: " + outcome})
	}
}
