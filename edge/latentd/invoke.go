package latentd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/edgecheck"
	"latent.dev/admission/policy"
)

// routes is the node's HTTP surface.
func (n *Node) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(invokePattern, n.invoke)
	mux.HandleFunc("GET /healthz", n.healthz)
	mux.HandleFunc("GET /readyz", n.readyz)
	mux.Handle("GET /metrics", n.metricsHandler())
	mux.HandleFunc("GET /v1/tenants/{tenant}/usage", n.usage)
	mux.HandleFunc("PUT /v1/admin/artifacts/sha256/{hex}", n.admin(n.putArtifact))
	mux.HandleFunc("PUT /v1/admin/deployments/{tenant}/{service}", n.admin(n.putDeployment))
	mux.HandleFunc("DELETE /v1/admin/deployments/{tenant}/{service}", n.admin(n.deleteDeployment))
	mux.HandleFunc("GET /v1/admin/snapshot", n.admin(n.snapshot))
	// Live profiles (net/http/pprof), for administrators only, under
	// the Host rule like every /debug/ path.
	mux.HandleFunc("GET /debug/pprof/", n.admin(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/cmdline", n.admin(pprof.Cmdline))
	mux.HandleFunc("GET /debug/pprof/profile", n.admin(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/symbol", n.admin(pprof.Symbol))
	mux.HandleFunc("GET /debug/pprof/trace", n.admin(pprof.Trace))
	n.status = &statusState{n: n, now: time.Now}
	n.statusPage(mux)
	return n.observe(n.localOnly(mux))
}

// invoke serves POST /v1/invoke/{tenant}/{service}/{route}: authenticate,
// refuse another tenant's path, read the headers and at most the payload
// maximum plus one byte, resolve, admit, run, answer.
func (n *Node) invoke(w http.ResponseWriter, r *http.Request) {
	n.inflight.Add(1)
	defer n.inflight.Done()
	principal, ok := n.tokens.Load().Authenticate(bearerToken(r.Header))
	if !ok {
		if n.rec != nil {
			n.rec.edgeUnauthenticated(r, n.settings)
		}
		unauthorized(w)
		return
	}
	tenant := r.PathValue("tenant")
	who := principal.core()
	if err := edgecheck.Authorize(n.provider, principal.Admin, &who, tenant); err != nil {
		// Decided before the catalog is consulted, so that whether the
		// other tenant or its deployment exists cannot show; the answer
		// is admission's own step 3, error value and all.
		if n.rec != nil {
			n.rec.edgeDenied(r, principal, n.settings, err)
		}
		n.rejectErr(w, err)
		return
	}
	note := noteOf(w)
	note.tenant = tenant
	settings := &n.settings
	inv, herr := parseInvocation(r.Header, settings.BudgetCeiling)
	if herr != nil {
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "malformed header: " + herr.problem, Header: herr.header})
		return
	}
	w.Header().Set(HeaderActivationID, inv.activationID)
	// Noted (for the access log) when the node generated it, or when the
	// caller's passes admission's own identifier rule: admission refuses
	// any other, and the log must not carry whatever a caller wrote.
	if inv.generatedID || policy.ValidIdentifier(inv.activationID, settings.MaximumIdentifierBytes) {
		note.activationID = inv.activationID
	}

	input, measured, err := readPayload(r.Body, settings.MaximumPayloadBytes)
	if err != nil {
		w.Header().Set("Connection", "close")
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "the request body could not be read"})
		return
	}

	v := n.view.Load()
	target := catalog.Target{Tenant: tenant, Service: r.PathValue("service"), Route: r.PathValue("route")}
	rev, handle, err := edgecheck.Resolve(v.pin, target, inv.routingKey)
	if err != nil {
		// A route that resolves to nothing and a forged revision look
		// alike (docs/decision-table.md, step 5).
		if n.rec != nil {
			n.rec.edgeUnresolved(r, principal, &inv, measured, v.pin.Generation())
		}
		n.rejectErr(w, err)
		return
	}
	note.service, note.route = rev.Service, rev.Route
	// The release the revision names stays runnable until the activation
	// ends, however the deployment changes meanwhile. A redeploy or a
	// delete between resolving and holding leaves nothing to hold: the
	// caller retries against the new generation.
	done, held := n.cfg.Guests.Hold(rev.Tenant, rev.Service, rev.Release)
	if !held && n.unavailable[releaseKey{rev.Tenant, rev.Service, rev.Release}] {
		// A stored deployment the module limits refused at start (logged
		// then): not available, however often the caller retries.
		n.reject(w, core.ErrRevisionNotAvailable)
		return
	}
	if !held {
		w.Header().Set("Retry-After", strconv.FormatUint(uint64(DefaultRetryAfterSeconds), 10))
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the deployment changed while the request was resolved; retry it"})
		return
	}
	finished := false
	defer func() {
		if !finished {
			done()
		}
	}()
	req := core.AdmissionRequest{
		ActivationID:    inv.activationID,
		Principal:       who,
		Handle:          handle, // it carries rev: the request names no identity of its own
		RequestedBudget: inv.budget,
		Deadline:        inv.deadline,
		PayloadBytes:    measured,
		Priority:        inv.priority,
	}
	var permit *core.AdmissionPermit
	if n.rec == nil {
		permit, err = v.controller.Admit(&req)
	} else {
		permit, err = n.rec.admit(v, target, &req, principal, &inv)
	}
	if err != nil {
		n.rejectErr(w, err)
		return
	}

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(n.hardStop, cancel)
	defer stop()
	act, err := n.pipe.Submit(ctx, permit, input)
	if err != nil {
		n.answerAfterAdmission(w, zeroReport, err)
		return
	}
	// Waited for under the request's context, not ctx: a guest that the
	// shutdown interrupts still has its outcome reported.
	report, err := act.Wait(r.Context())
	if err != nil && r.Context().Err() != nil {
		// The client is gone; the activation ends on its own, and lets
		// its release go then.
		finished = true
		go func() { <-act.Done(); done() }()
		return
	}
	n.answerAfterAdmission(w, report, err)
}

// core is the principal the token names, as admission takes it.
func (p Principal) core() core.Principal {
	return core.Principal{Kind: p.Kind, Subject: p.Subject, Tenant: p.Tenant, Service: p.Service}
}

// rejectErr answers an error from Admit, which is always a core.Error.
func (n *Node) rejectErr(w http.ResponseWriter, err error) {
	n.answerAfterAdmission(w, zeroReport, err)
}

// readPayload reads body up to max+1 bytes and reports how many it read:
// the payload is measured as it is read, never taken from Content-Length,
// and a body beyond the maximum is read no further than one byte past it.
func readPayload(body io.Reader, max uint64) ([]byte, uint64, error) {
	limit := int64(max) + 1
	if max >= uint64(1<<62) {
		limit = 1 << 62
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(body, limit))
	if err != nil {
		return nil, uint64(n), err
	}
	return buf.Bytes(), uint64(n), nil
}

// The invocation headers.
const (
	HeaderActivationID = "Latent-Activation-Id"
	HeaderRoutingKey   = "Latent-Routing-Key"
	HeaderPriority     = "Latent-Priority"
	HeaderDeadline     = "Latent-Deadline"
	HeaderCPUFuel      = "Latent-Cpu-Fuel"
	HeaderMemoryBytes  = "Latent-Memory-Bytes"
	HeaderWallTimeMs   = "Latent-Wall-Time-Ms"
	HeaderOutcome      = "Latent-Outcome"
)

// invocation is what the headers of one invocation ask for.
type invocation struct {
	activationID string
	generatedID  bool // activationID is newActivationID's, not the caller's
	routingKey   string
	priority     uint32
	deadline     policy.Optional[int64]
	budget       policy.Budget
}

// headerError is a malformed header: its name and a fixed description.
type headerError struct {
	header  string
	problem string
}

func (e *headerError) Error() string { return e.header + ": " + e.problem }

// single returns the one value of header name; more than one is an error,
// and so is a present but empty one.
func single(h http.Header, name string) (string, bool, *headerError) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
		if vs[0] == "" {
			return "", true, &headerError{name, "must not be empty"}
		}
		return vs[0], true, nil
	}
	return "", true, &headerError{name, "must appear at most once"}
}

// digitsOnly reports whether s is a non-empty run of ASCII digits: no
// sign, no space, no other base.
func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseUint(h http.Header, name string, bits int) (uint64, bool, *headerError) {
	s, ok, herr := single(h, name)
	if herr != nil || !ok {
		return 0, ok, herr
	}
	if !digitsOnly(s) {
		return 0, true, &headerError{name, "must be a whole number written in decimal digits"}
	}
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, true, &headerError{name, fmt.Sprintf("must be at most %d", uint64(1)<<bits-1)}
	}
	return v, true, nil
}

// parseInvocation reads the invocation headers. An absent budget
// dimension asks for what the ceilings allow: the node's ceiling for fuel
// and memory (the smallest layer decides), and no limit for wall time.
func parseInvocation(h http.Header, ceiling policy.NodeBudgetCeiling) (invocation, *headerError) {
	var inv invocation
	id, ok, herr := single(h, HeaderActivationID)
	if herr != nil {
		return inv, herr
	}
	if !ok {
		id, inv.generatedID = newActivationID(), true
	}
	inv.activationID = id
	key, ok, herr := single(h, HeaderRoutingKey)
	if herr != nil {
		return inv, herr
	}
	if !ok {
		key = id
	}
	inv.routingKey = key
	prio, _, herr := parseUint(h, HeaderPriority, 32)
	if herr != nil {
		return inv, herr
	}
	inv.priority = uint32(prio)
	deadline, ok, herr := parseUint(h, HeaderDeadline, 63)
	if herr != nil {
		return inv, herr
	}
	if ok {
		inv.deadline = policy.Some(int64(deadline))
	}
	inv.budget.CPUFuel = ceiling.CPUFuel
	if fuel, ok, herr := parseUint(h, HeaderCPUFuel, 64); herr != nil {
		return inv, herr
	} else if ok {
		inv.budget.CPUFuel = fuel
	}
	inv.budget.MemoryBytes = ceiling.MemoryBytes
	if mem, ok, herr := parseUint(h, HeaderMemoryBytes, 64); herr != nil {
		return inv, herr
	} else if ok {
		inv.budget.MemoryBytes = mem
	}
	wall, ok, herr := parseUint(h, HeaderWallTimeMs, 64)
	if herr != nil {
		return inv, herr
	}
	if ok {
		if wall > uint64(math.MaxInt64/int64(time.Millisecond)) {
			return inv, &headerError{HeaderWallTimeMs, "is too large a number of milliseconds"}
		}
		inv.budget.WallTime = policy.Some(time.Duration(wall) * time.Millisecond)
	}
	return inv, nil
}

// newActivationID is 16 random bytes in hex: 32 characters, an identifier
// under every node's minimum identifier bound.
func newActivationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// bearerToken extracts the token of an "Authorization: Bearer TOKEN"
// header, or "" when there is none.
func bearerToken(h http.Header) string {
	vs := h.Values("Authorization")
	if len(vs) != 1 {
		return ""
	}
	scheme, token, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
