package latentd

import (
	"net"
	"net/http"
	"strings"
)

// The Host rule: administrator endpoints (the status API among them) and
// everything under /debug/ answer only a request whose Host names this
// machine's loopback (an address in 127.0.0.0/8 or ::1, or localhost) or
// a name the operator allowed (Config.AllowedHosts). A browser that a web
// page has pointed at a loopback node through DNS rebinding sends the
// page's own name as Host, so the rule keeps such a page away from the
// node's administration even when it holds no token, and the rule sits in
// the handler, so that it holds whichever server serves it.

// errHostNotAllowed is the message of the Host rule's 403.
const errHostNotAllowed = "the Host header must name a loopback address, localhost or an allowed host"

// allowedHostSet is Config.AllowedHosts as the rule compares them:
// lowercased, without a trailing dot.
func allowedHostSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, name := range names {
		if h := canonicalHost(name); h != "" {
			set[h] = true
		}
	}
	return set
}

// canonicalHost lowercases a host name, drops one trailing dot (the DNS
// root) and the brackets of an IPv6 literal, so that "LOCALHOST." and
// "localhost", "[::1]" and "::1" compare equal.
func canonicalHost(name string) string {
	if strings.HasPrefix(name, "[") && strings.HasSuffix(name, "]") {
		name = name[1 : len(name)-1]
	}
	return strings.TrimSuffix(strings.ToLower(name), ".")
}

// hostAllowed reports whether r's Host passes the rule; its port, if
// any, is ignored.
func (n *Node) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = canonicalHost(host)
	if host == "" {
		return false
	}
	if host == "localhost" || n.allowedHosts[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuseHost is the Host rule's answer.
func refuseHost(w http.ResponseWriter) {
	edgeError(w, http.StatusForbidden, edgeErrorBody{Error: errHostNotAllowed, Header: "Host"})
}

// localOnly applies the Host rule to every path under /debug/, whichever
// handler serves it, before h sees the request.
func (n *Node) localOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/debug" || strings.HasPrefix(r.URL.Path, "/debug/")) && !n.hostAllowed(r) {
			refuseHost(w)
			return
		}
		h.ServeHTTP(w, r)
	})
}
