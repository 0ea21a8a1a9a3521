package latentd

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsHandler serves the node's registry: the edge/metrics collector
// (admission, usage, load, and the node's activation and queue-wait
// series), on a registry of its own so nothing global leaks in.
func (n *Node) metricsHandler() http.Handler {
	return promhttp.HandlerFor(n.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
