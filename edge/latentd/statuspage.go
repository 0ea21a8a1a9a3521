package latentd

import (
	"embed"
	"net/http"
)

// The status page: GET /status, /status.js and /status.css are a static
// shell embedded in the binary, served without authentication because
// they hold no data. The script reads an administrator token from the
// URL's fragment (which the browser never sends) or from a password
// field and polls GET /v1/admin/status with it as a bearer token; that
// endpoint is authorized like the administrator snapshot.

//go:embed status_assets
var statusAssets embed.FS

// statusCSP is the page's Content-Security-Policy: nothing but the
// node's own script, stylesheet and JSON endpoint; no inline script or
// style, no frames, no form submissions.
const statusCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// statusPage registers the status page's routes on mux: the static
// shell and, for administrators, its data.
func (n *Node) statusPage(mux *http.ServeMux) {
	mux.HandleFunc("GET /status", serveAsset("status_assets/status.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /status.js", serveAsset("status_assets/status.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /status.css", serveAsset("status_assets/status.css", "text/css; charset=utf-8"))
	mux.HandleFunc("GET /v1/admin/status", n.admin(n.status.serveStatus))
}

// serveAsset serves one embedded file with the page's security headers.
func serveAsset(name, contentType string) http.HandlerFunc {
	data, err := statusAssets.ReadFile(name)
	if err != nil {
		panic("latentd: the status page's asset " + name + " is not embedded") // a build defect, not input
	}
	return func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", statusCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
	}
}
