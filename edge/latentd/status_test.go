package latentd

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"latent.dev/admission/core"
	"latent.dev/admission/policy"
)

// wantRejection checks a rejection: its status, a body of exactly the five
// vocabulary fields with these values, and Retry-After exactly when it is
// retryable (with the configured value).
func wantRejection(t *testing.T, r response, status int, code, scope, dim, reason string, retryable bool, retryAfter string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	m := r.json(t)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if strings.Join(keys, ",") != "code,dimension,reason,retryable,scope" {
		t.Fatalf("body keys %v, want exactly code, scope, dimension, reason, retryable: %s", keys, r.body)
	}
	want := map[string]any{"code": code, "scope": scope, "dimension": dim, "reason": reason, "retryable": retryable}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	got, has := r.header["Retry-After"]
	switch {
	case retryable && (!has || len(got) != 1 || got[0] != retryAfter):
		t.Errorf("Retry-After %q on a retryable answer, want %q", got, retryAfter)
	case !retryable && has:
		t.Errorf("Retry-After %q on an answer that is not retryable", got)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
}

// wantEdgeError checks an edge answer: status, an "error" and, when
// header is set, the header it names.
func wantEdgeError(t *testing.T, r response, status int, header string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	m := r.json(t)
	if msg, _ := m["error"].(string); msg == "" {
		t.Errorf("no error message: %s", r.body)
	}
	if got, _ := m["header"].(string); got != header {
		t.Errorf("header %q, want %q", got, header)
	}
	if _, has := r.header["Retry-After"]; has {
		t.Errorf("Retry-After on an edge error")
	}
}

func TestStatusTable(t *testing.T) {
	tn := startNode(t, nodeOptions{mutate: func(c *Config) {
		c.RetryAfter = map[core.Reason]uint32{core.ReasonQueueDeadlineInfeasible: 3}
	}})

	t.Run("admitted and the guest succeeded: 200 with standard output", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "hello")
		if r.status != http.StatusOK || string(r.body) != "echo:hello" {
			t.Fatalf("%d %q", r.status, r.body)
		}
		if got := r.header.Get(HeaderOutcome); got != OutcomeSuccess {
			t.Errorf("Latent-Outcome %q", got)
		}
		if id := r.header.Get(HeaderActivationID); len(id) != 32 {
			t.Errorf("generated activation id %q", id)
		}
		if _, has := r.header["Retry-After"]; has {
			t.Error("Retry-After on a success")
		}
	})
	t.Run("the activation id is echoed", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderActivationID, "act-1")
		if r.status != http.StatusOK || r.header.Get(HeaderActivationID) != "act-1" {
			t.Fatalf("%d %v", r.status, r.header)
		}
	})
	for _, tc := range []struct{ name, token string }{{"missing token", ""}, {"unknown token", "nobody"}} {
		t.Run(tc.name+": 401 with WWW-Authenticate Bearer", func(t *testing.T) {
			r := tn.invoke("acme/echo/run", tc.token, "x")
			wantEdgeError(t, r, http.StatusUnauthorized, "Authorization")
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("a scheme other than Bearer is 401", func(t *testing.T) {
		r := tn.do(http.MethodPost, "/v1/invoke/acme/echo/run", "", nil, "Authorization", "Basic "+aliceToken)
		wantEdgeError(t, r, http.StatusUnauthorized, "Authorization")
	})
	t.Run("invalid-argument: 400", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderActivationID, strings.Repeat("a", 65))
		wantRejection(t, r, http.StatusBadRequest, "invalid-argument", "request", "activation-id", "identifier-invalid", false, "")
	})
	for _, tc := range []struct{ header, value string }{
		{HeaderPriority, "-1"}, {HeaderPriority, "4294967296"}, {HeaderPriority, "+1"}, {HeaderPriority, "1 2"},
		{HeaderDeadline, "soon"}, {HeaderDeadline, "9223372036854775808"},
		{HeaderCPUFuel, "1e9"}, {HeaderMemoryBytes, "18446744073709551616"},
		{HeaderWallTimeMs, "0x10"}, {HeaderWallTimeMs, "18446744073709551615"},
		{HeaderActivationID, ""}, {HeaderRoutingKey, ""},
	} {
		t.Run("malformed "+tc.header+" "+strconv.Quote(tc.value)+": 400 naming the header", func(t *testing.T) {
			r := tn.invoke("acme/echo/run", aliceToken, "x", tc.header, tc.value)
			wantEdgeError(t, r, http.StatusBadRequest, tc.header)
		})
	}
	t.Run("a header given twice: 400 naming it", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderPriority, "1", HeaderPriority, "2")
		wantEdgeError(t, r, http.StatusBadRequest, HeaderPriority)
	})
	t.Run("permission-denied: 403", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderPriority, "8")
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "tenant", "priority", "priority-not-authorized", false, "")
	})
	t.Run("a token of an unconfigured tenant: 403", func(t *testing.T) {
		r := tn.invoke("nowhere/echo/run", strayToken, "x")
		wantRejection(t, r, http.StatusForbidden, "permission-denied", "principal", "identity", "principal-not-authorized", false, "")
	})
	for _, path := range []string{"acme/echo/nosuch", "acme/nosuch/run"} {
		t.Run("the route does not resolve ("+path+"): 404", func(t *testing.T) {
			r := tn.invoke(path, aliceToken, "x")
			wantRejection(t, r, http.StatusNotFound, "admission-rejected", "revision", "revision", "revision-not-available", false, "")
		})
	}
	t.Run("other admission-rejected: 422", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderCPUFuel, "0")
		wantRejection(t, r, http.StatusUnprocessableEntity, "admission-rejected", "request", "cpu-fuel", "budget-infeasible", false, "")
	})
	t.Run("payload-too-large at the tenant: 413", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, strings.Repeat("p", 2049))
		wantRejection(t, r, http.StatusRequestEntityTooLarge, "resource-exhausted", "tenant", "payload-bytes", "payload-too-large", false, "")
	})
	t.Run("a payload exactly at the tenant's maximum is admitted", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, strings.Repeat("p", 2048))
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("payload-too-large at the node: 413", func(t *testing.T) {
		r := tn.invoke("globex/echo/run", bobToken, strings.Repeat("p", 4097))
		wantRejection(t, r, http.StatusRequestEntityTooLarge, "resource-exhausted", "node", "payload-bytes", "payload-too-large", false, "")
	})
	t.Run("deadline-exceeded: 504", func(t *testing.T) {
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderDeadline, "1")
		wantRejection(t, r, http.StatusGatewayTimeout, "deadline-exceeded", "request", "deadline", "deadline-exceeded", false, "")
	})
	t.Run("a deadline in the future is honoured", func(t *testing.T) {
		future := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
		r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderDeadline, future)
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})

	t.Run("with one guest holding the only small cell", func(t *testing.T) {
		held := make(chan response, 1)
		go func() { held <- tn.invoke("acme/echo/big", aliceToken, "hold", HeaderActivationID, "holder") }()
		<-tn.guests.started

		t.Run("already-exists: 409", func(t *testing.T) {
			r := tn.invoke("acme/echo/run", aliceToken, "x", HeaderActivationID, "holder")
			wantRejection(t, r, http.StatusConflict, "already-exists", "request", "activation-id", "activation-id-unavailable", false, "")
		})
		t.Run("queue-deadline-infeasible, retryable: 503 with the configured Retry-After", func(t *testing.T) {
			// One live on a class of parallelism 1: required = 100 + 20 + 10 ms.
			// A loaded machine may take the 90 ms before admission reads the
			// deadline, which is then past (504 deadline-exceeded): try again.
			var r response
			for try := 0; ; try++ {
				deadline := strconv.FormatInt(time.Now().Add(90*time.Millisecond).UnixMilli(), 10)
				r = tn.invoke("acme/echo/big", aliceToken, "x", HeaderDeadline, deadline)
				if r.status != http.StatusGatewayTimeout || try == 50 {
					break
				}
			}
			wantRejection(t, r, http.StatusServiceUnavailable, "admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", true, "3")
		})
		t.Run("queue-deadline-infeasible, not retryable: 422", func(t *testing.T) {
			// At most minimum execution + safety margin (30 ms) remain.
			r := tn.invoke("acme/echo/big", aliceToken, "x", HeaderWallTimeMs, "25")
			wantRejection(t, r, http.StatusUnprocessableEntity, "admission-rejected", "cell-class", "queue-delay", "queue-deadline-infeasible", false, "")
		})
		tn.closeHold()
		if r := <-held; r.status != http.StatusOK {
			t.Fatalf("the held guest: %d %s", r.status, r.body)
		}
	})
	tn.waitIdle()
}

func TestExecutionOutcomes(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for _, tc := range []struct {
		input   string
		status  int
		outcome string
		body    string
		headers []string
	}{
		{input: "declared", status: http.StatusUnprocessableEntity, outcome: OutcomeDeclaredError, body: "declared: no"},
		{input: "trap", status: http.StatusBadGateway, outcome: OutcomeTrap},
		{input: "block", status: http.StatusGatewayTimeout, outcome: OutcomeDeadline, headers: []string{HeaderWallTimeMs, "200"}},
		{input: "fuel", status: http.StatusBadGateway, outcome: OutcomeFuel},
		{input: "memory", status: http.StatusBadGateway, outcome: OutcomeMemory},
		{input: "platform", status: http.StatusInternalServerError, outcome: OutcomePlatformFailure},
	} {
		t.Run(tc.input, func(t *testing.T) {
			r := tn.invoke("acme/echo/run", aliceToken, tc.input, tc.headers...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if got := r.header.Get(HeaderOutcome); got != tc.outcome {
				t.Errorf("Latent-Outcome %q, want %q", got, tc.outcome)
			}
			if tc.body != "" && string(r.body) != tc.body {
				t.Errorf("body %q, want %q", r.body, tc.body)
			}
			if _, has := r.header["Retry-After"]; has {
				t.Error("Retry-After on an execution outcome")
			}
		})
	}
	t.Run("the deadline header interrupts a running guest at the deadline", func(t *testing.T) {
		start := time.Now()
		deadline := start.Add(300 * time.Millisecond)
		r := tn.invoke("acme/echo/run", aliceToken, "block", HeaderDeadline, strconv.FormatInt(deadline.UnixMilli(), 10))
		took := time.Since(start)
		if r.status != http.StatusGatewayTimeout || r.header.Get(HeaderOutcome) != OutcomeDeadline {
			t.Fatalf("%d %v %s", r.status, r.header, r.body)
		}
		// The upper bound only tells a hang: a loaded machine is slow.
		if took < 250*time.Millisecond || took > patience {
			t.Errorf("answered after %v, want about 300ms", took)
		}
	})
	tn.waitIdle()
}

func TestLoadRows(t *testing.T) {
	t.Run("node-overloaded: 503 with Retry-After", func(t *testing.T) {
		tn := startNode(t, nodeOptions{load: "overloaded", mutate: func(c *Config) {
			c.RetryAfter = map[core.Reason]uint32{core.ReasonNodeOverloaded: 7}
		}})
		r := tn.invoke("acme/echo/run", aliceToken, "x")
		wantRejection(t, r, http.StatusServiceUnavailable, "resource-exhausted", "node", "memory-pressure", "node-overloaded", true, "7")
		if r := tn.do(http.MethodGet, "/readyz", "", nil); r.status != http.StatusOK {
			t.Errorf("readyz %d: an overloaded node is still ready", r.status)
		}
	})
	t.Run("unavailable (no usable load sample): 503, and readyz 503", func(t *testing.T) {
		tn := startNode(t, nodeOptions{
			policy: func(p *policy.NodeAdmissionPolicy) { p.Node.Overload.MaximumObservationAge = 100 * time.Millisecond },
			mutate: func(c *Config) { c.SampleInterval = time.Hour },
		})
		if r := tn.do(http.MethodGet, "/readyz", "", nil); r.status != http.StatusOK {
			t.Fatalf("readyz %d right after start", r.status)
		}
		time.Sleep(150 * time.Millisecond)
		r := tn.invoke("acme/echo/run", aliceToken, "x")
		wantRejection(t, r, http.StatusServiceUnavailable, "unavailable", "load", "load-sample", "load-unavailable", true, "1")
		wantEdgeError(t, tn.do(http.MethodGet, "/readyz", "", nil), http.StatusServiceUnavailable, "")
		if r := tn.do(http.MethodGet, "/healthz", "", nil); r.status != http.StatusOK {
			t.Errorf("healthz %d", r.status)
		}
	})
}
