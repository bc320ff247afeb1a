package httpguard

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// CheckHost refuses with 403 a request that reached a loopback address with a Host header that is
// not a loopback name or address: a page of another site whose name now resolves to 127.0.0.1 (DNS
// rebinding) sends its own name.
func CheckHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if OnLoopback(r) && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CheckOrigin refuses with 403 a request from a browser page of another origin, whatever its method:
// one whose Origin header names another host, or whose Sec-Fetch-Site says cross-site. Requests
// without either (every client that is not a browser) pass. (http.CrossOriginProtection lets "safe"
// methods through, and a GET can open a stream or read a status.)
func CheckOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "Forbidden: cross-origin request", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// OnLoopback reports whether r arrived at a loopback address of this host (the listener's address
// for the connection, not what the client claims).
func OnLoopback(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && loopbackHost(local.String())
}

// sameOrigin reports whether origin (scheme://host[:port], or "null") names host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// loopbackHost reports whether addr (host or host:port) is localhost or a loopback address.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
