package latentd

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// tenantScope is edge/metrics' value of the scope label on a tenant's
// reserved and limit gauges, whose name label is the tenant.
const tenantScope = "tenant"

// metricsHandler serves the node's registry: the edge/metrics collector
// (admission, usage, load, and the node's activation and queue-wait
// series), on a registry of its own so nothing global leaks in.
//
// Who sees what: a request without a bearer token (an anonymous scraper)
// gets the node-level series only, with no tenant's name, reservations or
// limits, which /v1/tenants/{tenant}/usage refuses to anyone but the
// tenant; an administrator's or a metrics token gets every series; a
// tenant's token gets what an anonymous scraper gets; an unknown token is
// 401, as everywhere.
func (n *Node) metricsHandler() http.Handler {
	opts := promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}
	every := promhttp.HandlerFor(n.registry, opts)
	public := promhttp.HandlerFor(prometheus.GathererFunc(n.gatherPublic), opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The answer depends on the token: no cache may hand one
		// caller's scrape to another.
		w.Header().Set("Vary", "Authorization")
		token := bearerToken(r.Header)
		if token == "" {
			public.ServeHTTP(w, r)
			return
		}
		principal, ok := n.tokens.Load().Authenticate(token)
		if !ok {
			unauthorized(w)
			return
		}
		if principal.Admin || principal.Metrics {
			w.Header().Set("Cache-Control", "no-store")
			every.ServeHTTP(w, r)
			return
		}
		public.ServeHTTP(w, r)
	})
}

// gatherPublic gathers the registry and leaves out every series that
// names a tenant, and every family left empty.
func (n *Node) gatherPublic() ([]*dto.MetricFamily, error) {
	families, err := n.registry.Gather()
	kept := families[:0]
	for _, f := range families {
		series := f.Metric[:0]
		for _, m := range f.Metric {
			if !namesTenant(m) {
				series = append(series, m)
			}
		}
		f.Metric = series
		if len(series) > 0 {
			kept = append(kept, f)
		}
	}
	return kept, err
}

// namesTenant reports whether a series carries a tenant as a label value:
// a tenant scope's gauge, or any label called tenant.
func namesTenant(m *dto.Metric) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == "tenant" || (l.GetName() == "scope" && l.GetValue() == tenantScope) {
			return true
		}
	}
	return false
}
