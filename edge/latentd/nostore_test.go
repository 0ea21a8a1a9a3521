package latentd

import (
	"net/http"
	"testing"
)

// Every answer to a request that carries a token says Cache-Control:
// no-store, the live profiles' among them, whatever the answer.
func TestEveryAuthenticatedAnswerIsNoStore(t *testing.T) {
	tn := startNode(t, nodeOptions{})
	for _, tc := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/debug/pprof/", adminToken, http.StatusOK},
		{http.MethodGet, "/debug/pprof/heap", adminToken, http.StatusOK},
		{http.MethodGet, "/debug/pprof/goroutine?debug=1", adminToken, http.StatusOK},
		{http.MethodGet, "/debug/pprof/cmdline", adminToken, http.StatusOK},
		{http.MethodGet, "/debug/pprof/symbol", adminToken, http.StatusOK},
		{http.MethodGet, "/debug/pprof/heap", aliceToken, http.StatusForbidden},
		{http.MethodGet, "/v1/admin/snapshot", adminToken, http.StatusOK},
		{http.MethodGet, "/v1/tenants/acme/usage", aliceToken, http.StatusOK},
		{http.MethodGet, "/metrics", metricsToken, http.StatusOK},
		{http.MethodGet, "/metrics", aliceToken, http.StatusOK},
		{http.MethodPost, "/v1/invoke/acme/echo/run", aliceToken, http.StatusOK},
		{http.MethodPost, "/v1/invoke/acme/echo/run", "not-a-token", http.StatusUnauthorized},
		{http.MethodPost, "/v1/invoke/globex/echo/run", aliceToken, http.StatusForbidden},
		{http.MethodGet, "/healthz", aliceToken, http.StatusOK},
	} {
		r := tn.do(tc.method, tc.path, tc.token, []byte("x"))
		if r.status != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s %s with a token: Cache-Control %q, want no-store", tc.method, tc.path, got)
		}
	}
}
