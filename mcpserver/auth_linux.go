package mcpserver

import (
	"net"
	"net/http"

	"github.com/cgreaper/reaper/internal/httpguard"
	"github.com/cgreaper/reaper/mcpserver/internal/sdkfix"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// identityHeader carries a request's identity (its token's, or without tokens its peer's) from the
// authentication to the front and the tools, which the SDK hands it (mcp.RequestExtra.Header);
// whatever a client sent in it is replaced first.
const identityHeader = "Reaper-Identity"

func identity(r *http.Request) string { return r.Header.Get(identityHeader) }

// owner is the identity a request to a tool was authenticated as; "" over stdio, which has one client.
func owner(req mcp.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		return extra.Header.Get(identityHeader)
	}
	return ""
}

// requireBearer lets through requests with one of tokens, as the identity the token stands for,
// and refuses the others (sdkfix.RequireBearer) and those over their identity's connections
// (httpguard.Authenticated).
func requireBearer(tokens map[string]string, next http.Handler) http.Handler {
	return sdkfix.RequireBearer(verifier(tokens), "reaper", "reaper serve's first log line says where its token is",
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := ""
			if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
				id = ti.UserID
			}
			if !httpguard.Authenticated(w, r, id) {
				return
			}
			r.Header.Set(identityHeader, id)
			next.ServeHTTP(w, r)
		}))
}

// byPeer lets every request through as its peer's identity (HTTPOptions.Unauthenticated), and counts
// its connection under that identity as requireBearer does.
func byPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := httpguard.Peer(r)
		if peer == "" { // a listener httpguard.Limit did not wrap: the address, without the port
			peer = r.RemoteAddr
			if host, _, err := net.SplitHostPort(peer); err == nil {
				peer = host
			}
		}
		id := "peer " + peer
		if !httpguard.Authenticated(w, r, id) {
			return
		}
		r.Header.Set(identityHeader, id)
		next.ServeHTTP(w, r)
	})
}

// refuseAll answers every request 401: an HTTP handler made with neither tokens nor
// HTTPOptions.Unauthenticated fails closed.
func refuseAll() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "Unauthorized: this server has no token configured", http.StatusUnauthorized)
	})
}
