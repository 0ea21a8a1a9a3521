package latentd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"latent.dev/admission/catalog"
	"latent.dev/admission/core"
	"latent.dev/admission/internal/edgecheck"
	"latent.dev/admission/policy"
	"latent.dev/admission/problems"
)

// admin wraps an administrator endpoint: a Host the Host rule refuses is
// 403 before the token is looked at, no token is 401, a token that is not
// an administrator's 403.
func (n *Node) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !n.hostAllowed(r) {
			refuseHost(w)
			return
		}
		principal, ok := n.tokens.Load().Authenticate(bearerToken(r.Header))
		if !ok {
			unauthorized(w)
			return
		}
		if !principal.Admin {
			edgeError(w, http.StatusForbidden, edgeErrorBody{Error: "an administrator token is required"})
			return
		}
		h(w, r)
	}
}

// readBody reads at most limit bytes of r's body; more is an error (and
// the rest is not read).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		w.Header().Set("Connection", "close")
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "the request body could not be read"})
		return nil, false
	}
	if int64(len(data)) > limit {
		w.Header().Set("Connection", "close")
		edgeError(w, http.StatusRequestEntityTooLarge, edgeErrorBody{Error: "the body is larger than " + strconv.FormatInt(limit, 10) + " bytes"})
		return nil, false
	}
	return data, true
}

// putArtifact serves PUT /v1/admin/artifacts/sha256/{hex}.
func (n *Node) putArtifact(w http.ResponseWriter, r *http.Request) {
	w = n.answerWhenDone(w)
	hexDigest := r.PathValue("hex")
	if _, ok := parseHexDigest(hexDigest); !ok {
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "the digest must be 64 lowercase hex digits", Path: "hex"})
		return
	}
	if err := n.cfg.Guests.PutArtifact(hexDigest, r.Body); err != nil {
		w.Header().Set("Connection", "close")
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "artifact refused: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"digest": "sha256:" + hexDigest})
}

// putDeployment serves PUT /v1/admin/deployments/{tenant}/{service}: the
// body is one deployment in the catalog's JSON form, checked against the
// node policy; every artifact it names must be present and compile.
//
// The compile runs outside adminMu, under the request's context, and
// takes what it takes: the answer's write deadline starts when the
// answer does (answerWhenDone). Then, under adminMu, the runtime and the
// catalog switch together, unless the client went away meanwhile: an
// abandoned deploy changes nothing, and a deploy that changed something
// is answered.
func (n *Node) putDeployment(w http.ResponseWriter, r *http.Request) {
	w = n.answerWhenDone(w)
	data, ok := readBody(w, r, n.cfg.MaxDeploymentBytes)
	if !ok {
		return
	}
	// The body is read to its end, so the server now watches for the
	// client going away (which ends r.Context()), without a read deadline:
	// net/http lifts the request's ReadTimeout for that watch.
	d, err := catalog.ValidateDeployment(data, n.cfg.Policy)
	if err != nil {
		writeProblems(w, "invalid deployment", problems.Of(err))
		return
	}
	tenant, service := r.PathValue("tenant"), r.PathValue("service")
	if d.Tenant != tenant || d.Service != service {
		edgeError(w, http.StatusBadRequest, edgeErrorBody{Error: "the deployment's tenant and service must be the path's", Path: "$.tenant"})
		return
	}
	ctx := r.Context()
	prepared, err := n.cfg.Guests.Prepare(ctx, d)
	if err != nil {
		if ctx.Err() != nil {
			n.abandoned(w, tenant, service)
			return
		}
		edgeError(w, http.StatusUnprocessableEntity, edgeErrorBody{Error: "refused: " + err.Error(), Path: "$.routes"})
		return
	}
	defer prepared.Discard()
	n.adminMu.Lock()
	gen, err := n.deployLocked(ctx, d, prepared)
	n.adminMu.Unlock()
	switch {
	case errors.Is(err, errAbandoned):
		n.abandoned(w, tenant, service)
	case errors.Is(err, errGuestsClosed):
		w.Header().Set("Retry-After", strconv.FormatUint(uint64(DefaultRetryAfterSeconds), 10))
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the node is shutting down"})
	case err != nil:
		n.catalogError(w, err)
	default:
		note := noteOf(w)
		note.tenant, note.service = tenant, service
		writeJSON(w, http.StatusOK, map[string]uint64{"generation": gen})
	}
}

var (
	// errAbandoned: the deploy's client went away before it took effect.
	errAbandoned = errors.New("latentd: deploy abandoned")
	// errGuestsClosed: the guest runtime is closed (shutdown).
	errGuestsClosed = errors.New("latentd: guest runtime closed")
)

// deployLocked switches the guest runtime to prepared and the catalog to
// d together, or neither; adminMu must be held. A ctx that has ended
// (the client went away) changes nothing: errAbandoned.
func (n *Node) deployLocked(ctx context.Context, d catalog.Deployment, prepared Prepared) (uint64, error) {
	if ctx.Err() != nil {
		return 0, errAbandoned
	}
	previous, err := prepared.Commit()
	if err != nil {
		return 0, errGuestsClosed
	}
	gen, err := n.catalog.Deploy(d)
	if err != nil {
		// Put the runtime back as it was: what prepared replaced runs
		// again, and prepared's modules go.
		replaced, undoErr := previous.Commit()
		if undoErr != nil {
			previous.Discard()
			n.cfg.Logger.Error("latentd: restoring the previous deployment's guests failed", "tenant", d.Tenant, "service", d.Service, "err", undoErr)
		} else {
			replaced.Discard()
		}
		return 0, err
	}
	previous.Discard()
	if n.rec != nil {
		// The line's order is drawn before the view is published, so
		// every decision made on the new generation comes after it.
		if err := n.rec.deployed(gen, d); err != nil {
			n.cfg.Logger.Error("latentd: record: encoding a deployment failed; the trace marks a dropped line", "tenant", d.Tenant, "service", d.Service, "err", err)
		}
	}
	n.publishViewLocked()
	return gen, nil
}

// abandoned is the answer to a deploy whose client went away before it
// took effect: nothing changed. Nobody reads it; it keeps the server
// from answering an empty 200.
func (n *Node) abandoned(w http.ResponseWriter, tenant, service string) {
	n.cfg.Logger.Info("latentd: deploy abandoned: the client went away; nothing changed", "tenant", tenant, "service", service)
	edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the deploy was abandoned: its client went away; nothing changed"})
}

// deleteDeployment serves DELETE /v1/admin/deployments/{tenant}/{service}.
// The catalog and the runtime change together under adminMu.
func (n *Node) deleteDeployment(w http.ResponseWriter, r *http.Request) {
	w = n.answerWhenDone(w)
	n.adminMu.Lock()
	tenant, service := r.PathValue("tenant"), r.PathValue("service")
	gen, err := n.catalog.Delete(tenant, service)
	if err == nil {
		if n.rec != nil {
			n.rec.undeployed(gen, tenant, service) // before the view: see deployLocked
		}
		n.publishViewLocked()
		// Guests running, or admitted and holding their release, keep
		// their module until they stop.
		n.cfg.Guests.Undeploy(tenant, service)
	}
	n.adminMu.Unlock()
	if err != nil {
		n.catalogError(w, err)
		return
	}
	note := noteOf(w)
	note.tenant, note.service = tenant, service
	writeJSON(w, http.StatusOK, map[string]uint64{"generation": gen})
}

// publishViewLocked pins the catalog's current generation for
// invocations; adminMu must be held, so views appear in order.
func (n *Node) publishViewLocked() {
	pin := n.catalog.Pin()
	n.view.Store(&view{pin: pin, controller: n.base.WithPolicySource(pin)})
}

func (n *Node) catalogError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, catalog.ErrNotDeployed):
		edgeError(w, http.StatusNotFound, edgeErrorBody{Error: "no such deployment"})
	case errors.Is(err, catalog.ErrInvalidDeployment):
		writeProblems(w, "invalid deployment", problems.Of(err))
	case errors.Is(err, catalog.ErrCapacityExceeded):
		edgeError(w, http.StatusConflict, edgeErrorBody{Error: "the catalog's capacity would be exceeded"})
	case errors.Is(err, catalog.ErrClosed):
		w.Header().Set("Retry-After", strconv.FormatUint(uint64(DefaultRetryAfterSeconds), 10))
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the node is shutting down"})
	default:
		n.cfg.Logger.Error("latentd: catalog change failed", "err", err)
		edgeError(w, http.StatusInternalServerError, edgeErrorBody{Error: "the catalog change could not be stored; its outcome is unknown, retry it"})
	}
}

// problemJSON is one problem of a refused body: its JSON path from the
// body's root, `$`, and what is wrong there.
type problemJSON struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// writeProblems answers 400 with every problem of a refused body.
func writeProblems(w http.ResponseWriter, what string, ps problems.List) {
	out := make([]problemJSON, len(ps))
	for i, p := range rooted(ps) {
		out[i] = problemJSON{Path: p.Path, Message: p.Message}
	}
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": what, "problems": out})
}

// usage serves GET /v1/tenants/{tenant}/usage: the tenant's quota
// snapshot, for its own principals that the policy lists (invoke's
// check) and administrators. Anyone else gets the same 403 whether or
// not the tenant exists.
func (n *Node) usage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	principal, ok := n.tokens.Load().Authenticate(bearerToken(r.Header))
	if !ok {
		unauthorized(w)
		return
	}
	tenant := r.PathValue("tenant")
	if !principal.Admin {
		who := principal.core()
		if err := edgecheck.Authorize(n.provider, false, &who, tenant); err != nil {
			n.rejectErr(w, err)
			return
		}
	}
	snap, ok := n.provider.TenantSnapshot(tenant)
	if !ok {
		edgeError(w, http.StatusNotFound, edgeErrorBody{Error: "no such tenant"})
		return
	}
	noteOf(w).tenant = tenant
	writeJSON(w, http.StatusOK, usageJSON{Tenant: tenant, Live: snap.Live, Queued: snap.Queued, CPUFuel: snap.CPUFuel,
		MemoryBytes: snap.MemoryBytes, Limits: limitsOf(snap.Limits)})
}

type usageJSON struct {
	Tenant      string     `json:"tenant,omitempty"`
	Name        string     `json:"name,omitempty"`
	Live        uint64     `json:"live_activations"`
	Queued      uint64     `json:"queued_reservations"`
	CPUFuel     uint64     `json:"reserved_cpu_fuel"`
	MemoryBytes uint64     `json:"reserved_memory_bytes"`
	Limits      limitsJSON `json:"limits"`
}

type limitsJSON struct {
	Live        uint64 `json:"max_live_activations"`
	Queued      uint64 `json:"max_queued_reservations"`
	CPUFuel     uint64 `json:"max_reserved_cpu_fuel"`
	MemoryBytes uint64 `json:"max_reserved_memory_bytes"`
}

func limitsOf(l policy.Limits) limitsJSON {
	return limitsJSON{Live: l.MaxLiveActivations, Queued: l.MaxQueuedReservations, CPUFuel: l.MaxReservedCPUFuel,
		MemoryBytes: l.MaxReservedMemoryBytes}
}

func scopeJSON(s core.ScopeUsage) usageJSON {
	return usageJSON{Name: s.Name, Live: s.Live, Queued: s.Queued, CPUFuel: s.CPUFuel, MemoryBytes: s.MemoryBytes, Limits: limitsOf(s.Limits)}
}

// snapshot serves GET /v1/admin/snapshot: the catalog's generation and
// deployments, every scope's usage, the counters and the load sample.
func (n *Node) snapshot(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	pin := n.view.Load().pin
	type deploymentJSON struct {
		Tenant     string `json:"tenant"`
		Service    string `json:"service"`
		Generation uint64 `json:"generation"`
	}
	deployments := []deploymentJSON{}
	for _, key := range pin.Deployments() {
		if _, gen, ok := pin.Deployment(key.Tenant, key.Service); ok {
			deployments = append(deployments, deploymentJSON{key.Tenant, key.Service, gen})
		}
	}
	u := n.provider.Usage()
	scopes := func(list []core.ScopeUsage) []usageJSON {
		out := make([]usageJSON, 0, len(list))
		for _, s := range list {
			out = append(out, scopeJSON(s))
		}
		return out
	}
	queues := []map[string]any{}
	for _, q := range u.QueueClasses {
		queues = append(queues, map[string]any{"name": q.Name, "queued_reservations": q.Queued, "max_queued": q.MaxQueued})
	}
	cells := []map[string]any{}
	for _, c := range u.CellClasses {
		cells = append(cells, map[string]any{"class": c.Class.String(), "live_activations": c.Live})
	}
	m := n.provider.Metrics()
	var load any
	if s, ok := n.load.CurrentLoad(); ok {
		load = map[string]any{"sequence": s.Sequence, "observed_at_unix_ms": s.ObservedAt.UnixMilli(), "cpu": s.CPUPressure,
			"memory": s.MemoryPressure, "age_ms": time.Since(s.ObservedAt).Milliseconds()}
	}
	catUsage := pin.CapacityUse()
	writeJSON(w, http.StatusOK, map[string]any{
		"catalog": map[string]any{"generation": pin.Generation(), "deployments": deployments, "revisions": catUsage.Revisions,
			"policy_bytes": catUsage.PolicyBytes},
		"usage": map[string]any{"node": scopeJSON(u.Node), "tenants": scopes(u.Tenants), "trust_classes": scopes(u.TrustClasses),
			"queue_classes": queues, "cell_classes": cells},
		"counters":          map[string]int64{"admitted": m.Admitted, "leaked_permits": m.Leaked},
		"live_reservations": n.provider.LiveReservations(),
		"load":              load,
	})
}

// healthz is 200 while the node serves.
func (n *Node) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "serving"})
}

// readyz is 200 when the catalog is open and a usable load sample exists.
func (n *Node) readyz(w http.ResponseWriter, _ *http.Request) {
	if !n.catalogOpen.Load() {
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "the catalog is closed"})
		return
	}
	if !n.loadUsable() {
		edgeError(w, http.StatusServiceUnavailable, edgeErrorBody{Error: "no usable load sample"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// loadUsable reports whether admission would accept the current sample's
// age: one exists, it is not from the future, and it is no older than the
// maximum observation age.
func (n *Node) loadUsable() bool {
	s, ok := n.load.CurrentLoad()
	if !ok {
		return false
	}
	age := time.Since(s.ObservedAt)
	return age >= 0 && age <= n.provider.Policy().Node().Overload.MaximumObservationAge
}
