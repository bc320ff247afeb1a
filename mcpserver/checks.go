package mcpserver

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The checks the SDK's handler makes before it acts on a request, made again in front of the session
// front (see HTTPHandler): the front acts first (a DELETE's teardown, a request counted as activity on
// the idle lease), so a request the SDK would refuse must not get that far.

// checkHost refuses, as the SDK does, a request that reached a loopback listener with a Host header
// that is not a loopback name or address: a page of another site whose name now resolves to 127.0.0.1
// (DNS rebinding) sends its own name.
func checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			loopbackHost(local.String()) && !loopbackHost(r.Host) {
			http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin refuses a request from another origin that http.CrossOriginProtection lets through
// because its method is "safe": a GET opens the session's stream of server messages, and the MCP
// specification wants any request with an invalid Origin refused with 403. Requests without Origin
// (every non-browser client) pass.
func checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !sameOrigin(origin, r.Host) || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			http.Error(w, "Forbidden: cross-origin request", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
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
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

const protocolVersionHeader = "Mcp-Protocol-Version"

// firstSessionlessVersion is the protocol version from which the SDK lets any version through its
// header check (it answers those requests itself).
const firstSessionlessVersion = "2026-07-28"

// publishedVersions are the protocol versions the SDK speaks, read once: the SDK copies its list on
// every call, and every request looks at it. Never modified.
var publishedVersions = mcp.SupportedProtocolVersions()

// supportedVersion reports whether the SDK accepts a request's MCP-Protocol-Version header.
func supportedVersion(v string) bool {
	return v == "" || v >= firstSessionlessVersion || slices.Contains(publishedVersions, v)
}
