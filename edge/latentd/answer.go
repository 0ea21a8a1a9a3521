package latentd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// invokePattern is the mux pattern of invocations.
const invokePattern = "POST /v1/invoke/{tenant}/{service}/{route}"

// requestNote is what the handler that answered a request learned about
// it, handed to the status page and the access log when the answer is
// done, so that neither reads the answer back nor resolves anything
// again. Every string in it is validated: a configured name, a checked
// activation ID, or one of the node's own words.
type requestNote struct {
	// tenant is set once the caller is authenticated for it (or is an
	// administrator acting on it); service and route once they resolved
	// to configured names.
	tenant, service, route string
	// activationID is the validated Latent-Activation-Id.
	activationID string
	// outcome is the Latent-Outcome of an activation that ran or was
	// scheduled; reason the admission rejection's.
	outcome string
	reason  core.Reason
}

// answerWriter wraps every request's ResponseWriter: it remembers the
// status and the bytes written, and carries the request's note.
type answerWriter struct {
	http.ResponseWriter
	status  int
	written int64
	note    requestNote
}

func (w *answerWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noteOf is the note of the request that w answers. A writer that observe
// did not wrap (a handler called on its own, as some tests do) gets a
// note nobody reads.
func noteOf(w http.ResponseWriter) *requestNote {
	for {
		switch x := w.(type) {
		case *answerWriter:
			return &x.note
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return &requestNote{}
		}
	}
}

// setOutcome answers the Latent-Outcome header and notes it.
func setOutcome(w http.ResponseWriter, outcome string) {
	w.Header()[HeaderOutcome] = headerValue(outcome)
	noteOf(w).outcome = outcome
}

// fixedValues are the header values the node answers with most, each a
// one-element slice made once, so that setting one allocates nothing.
// net/http copies a handler's header before it writes it and never
// changes a value in place, and nothing here does either (Header.Set
// replaces a key's slice, Header.Add appends past its length), so the
// slices are never written.
var fixedValues = func() map[string][]string {
	m := map[string][]string{}
	for _, v := range []string{"no-store", OutcomeSuccess, OutcomeDeclaredError, OutcomeTrap, OutcomeDeadline, OutcomeFuel,
		OutcomeMemory, OutcomeCanceled, OutcomePlatformFailure} {
		m[v] = []string{v}
	}
	return m
}()

// headerValue is a header's value v as the one-element slice of a
// header map: a fixed one when v is one of fixedValues, else a new one.
func headerValue(v string) []string {
	if vs, ok := fixedValues[v]; ok {
		return vs
	}
	return []string{v}
}

// observed is what observe wraps a request in: the answer's writer and
// the body's counter, allocated together.
type observed struct {
	aw   answerWriter
	body bodyCounter
}

// bodyCounter counts the request body's bytes as the handler reads them.
type bodyCounter struct {
	io.ReadCloser
	n int64
}

func (b *bodyCounter) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// observe wraps the node's routes: it samples the rejection counters for
// the status page at most once a second, marks every answer to a request
// that carries a token Cache-Control: no-store, and once a request is answered
// hands its note to the status page's ring (an invocation that ran or
// was scheduled) and to the access log.
func (n *Node) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := n.status.now()
		n.status.maybeSample(start)
		o := &observed{aw: answerWriter{ResponseWriter: w}, body: bodyCounter{ReadCloser: r.Body}}
		aw, body := &o.aw, &o.body
		if len(r.Header["Authorization"]) != 0 {
			// No cache may keep an answer to a token, whichever handler
			// gives it (pprof's among them) and whatever it says.
			aw.Header()["Cache-Control"] = headerValue("no-store")
		}
		r.Body = body
		next.ServeHTTP(aw, r)
		end := n.status.now()
		// The mux set r's pattern in place.
		if r.Pattern == invokePattern && aw.note.outcome != "" {
			n.status.record(end, &aw.note, aw.status, end.Sub(start))
		}
		if n.cfg.AccessLog != nil {
			n.logAccess(r, aw, body.n, end.Sub(start))
		}
	})
}

// logAccess writes one access-log line. It names the route's pattern,
// never the path a caller sent, and only what the note validated: never
// a token, a payload or a header value.
func (n *Node) logAccess(r *http.Request, aw *answerWriter, bytesIn int64, d time.Duration) {
	path := "unmatched"
	if r.Pattern != "" {
		_, path, _ = strings.Cut(r.Pattern, " ")
	}
	status := aw.status
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing
	}
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs, slog.String("method", methodOf(r)), slog.String("path", path))
	note := &aw.note
	if note.tenant != "" {
		attrs = append(attrs, slog.String("tenant", note.tenant))
	}
	if note.service != "" {
		attrs = append(attrs, slog.String("service", note.service))
	}
	if note.route != "" {
		attrs = append(attrs, slog.String("route", note.route))
	}
	if note.activationID != "" {
		attrs = append(attrs, slog.String("activation_id", note.activationID))
	}
	attrs = append(attrs, slog.Int("status", status))
	switch {
	case note.outcome != "":
		attrs = append(attrs, slog.String("outcome", note.outcome))
	case note.reason != "":
		attrs = append(attrs, slog.String("reason", string(note.reason)))
	}
	attrs = append(attrs, slog.Duration("duration", d), slog.Int64("bytes_in", bytesIn), slog.Int64("bytes_out", aw.written))
	n.cfg.AccessLog.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// methodOf is r's method when it is one the node serves, else "other":
// the method is the caller's own string.
func methodOf(r *http.Request) string {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead:
		return r.Method
	}
	return "other"
}
